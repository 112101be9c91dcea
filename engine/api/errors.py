"""How errors cross the wire: each CCattler error class maps to one gRPC status code, with the
error's own message; anything unexpected is INTERNAL with a request id, never a traceback."""

from __future__ import annotations

import re

import grpc

from ccattler.engine.facts import CcaError, InvalidKey, InvalidValue


class Unauthenticated(CcaError):
    """The caller presented no valid credentials."""


class Forbidden(CcaError):
    """The caller is known but may not do this."""


class NotFound(CcaError):
    """The named object does not exist."""


class BadRequest(CcaError):
    """The request is malformed or names something invalid."""


class Conflict(CcaError):
    """The object changed concurrently; the caller may retry."""

    retriable = True


class RateLimited(CcaError):
    """Too many requests from this caller."""

    retriable = True


class FellBehind(CcaError):
    """A watch stream's client read too slowly: its queue passed the byte bound, so the server
    dropped it. The client resumes from the last revision it received (or re-lists)."""

    retriable = True

    def __init__(self, revision: int, queued: int, limit: int) -> None:
        super().__init__(f"watch fell behind at revision {revision} ({queued} bytes queued, limit {limit}); "
                         f"resume from revision {revision} or re-list")
        self.revision = revision


def fell_behind_at(details: str) -> int | None:
    """The revision to resume from, out of a `FellBehind` message (None: some other error)."""
    match = re.match(r"watch fell behind at revision (\d+)", details)
    return int(match.group(1)) if match else None


#: Checked in order; the first class the error is an instance of decides the code.
_CODES: list[tuple[str, grpc.StatusCode]] = [
    ("Unauthenticated", grpc.StatusCode.UNAUTHENTICATED),
    ("TokenError", grpc.StatusCode.UNAUTHENTICATED),
    ("Forbidden", grpc.StatusCode.PERMISSION_DENIED),
    ("AdmissionDenied", grpc.StatusCode.PERMISSION_DENIED),
    ("Denied", grpc.StatusCode.PERMISSION_DENIED),
    ("NotFound", grpc.StatusCode.NOT_FOUND),
    ("UnknownTarget", grpc.StatusCode.NOT_FOUND),
    ("Conflict", grpc.StatusCode.ABORTED),
    ("SecretConflict", grpc.StatusCode.ABORTED),
    ("RateLimited", grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("TxnTooLarge", grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("FellBehind", grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("StoreUnavailable", grpc.StatusCode.UNAVAILABLE),
    ("AuditUnavailable", grpc.StatusCode.UNAVAILABLE),
    ("Compacted", grpc.StatusCode.OUT_OF_RANGE),
    # The language, policies and kinds: the request itself is wrong.
    ("DslError", grpc.StatusCode.INVALID_ARGUMENT),
    ("SourceError", grpc.StatusCode.INVALID_ARGUMENT),
    ("PolicyError", grpc.StatusCode.INVALID_ARGUMENT),
    ("UnknownKind", grpc.StatusCode.INVALID_ARGUMENT),
    ("BadCapability", grpc.StatusCode.INVALID_ARGUMENT),
]


def status_of(exc: BaseException) -> grpc.StatusCode:
    """The gRPC status for an error raised while serving a call."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    for name, code in _CODES:
        if name in names:
            return code
    if isinstance(exc, (BadRequest, InvalidKey, InvalidValue, ValueError)):
        return grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(exc, CcaError):
        return grpc.StatusCode.FAILED_PRECONDITION
    return grpc.StatusCode.INTERNAL


#: Status codes the client maps back to retriable errors.
RETRIABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED,
                             grpc.StatusCode.RESOURCE_EXHAUSTED})
