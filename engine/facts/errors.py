"""The root of CCattler's error hierarchy; every error a user can see derives from `CcaError`."""


class CcaError(Exception):
    """An error CCattler reports to its user as a message, never as a traceback."""

    #: True when repeating the same call later may succeed (conflicts, unreachable peers).
    retriable: bool = False


class InvalidKey(CcaError, ValueError):
    """A fact key is empty, malformed or too long."""


class InvalidValue(CcaError, ValueError):
    """A fact value is not a JSON document or is larger than the store accepts."""
