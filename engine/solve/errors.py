"""Errors of the logic engine: clingo's messages translated into `CcaError`s with file:line:col."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from ccattler.engine.facts import CcaError


class LogicError(CcaError):
    """A logic program could not be loaded, grounded or solved."""


class LogicSyntaxError(LogicError):
    """A `.lp` source does not parse (the message starts with file:line:col)."""


class GroundingError(LogicError):
    """A program parsed but cannot be grounded: unsafe variables, bad arithmetic, undefined parts."""


class ProgramNotFound(LogicError):
    """No `rules/<name>.lp` (or a named extension directory does not exist)."""


class SymbolRangeError(LogicError, ValueError):
    """A Python value cannot become a clingo symbol (e.g. an integer outside 32 bits)."""


# clingo prefixes every message with `<file>:<line>:<col>[-<col>]: error: `.
_LOCATION = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+)(?:-\d+(?::\d+)?)?: (?P<rest>.*)$", re.S)


class MessageLog:
    """Collects clingo's logger messages so a failure can be reported with its locations."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.label: str | None = None

    def __call__(self, code: object, message: object) -> None:
        # Called from a clingo nothrow callback: an exception here aborts the process, so nothing
        # may escape (bytes are decoded with replacement, anything else is swallowed).
        try:
            if isinstance(message, bytes):
                message = message.decode("utf-8", "replace")
            text = str(message)
            if self.label is not None:
                text = text.replace("<block>", self.label)
            self.messages.append(text.strip())
        except BaseException:  # noqa: BLE001 - see above
            pass

    def errors(self) -> list[str]:
        return [m for m in self.messages if ": error:" in m]

    def summary(self) -> str:
        """The error messages, each as `file:line:col: error: text`, notes kept on following lines."""
        errors = self.errors() or self.messages
        lines: list[str] = []
        for message in errors:
            match = _LOCATION.match(message)
            lines.append(
                f"{match['file']}:{match['line']}:{match['col']}: {match['rest']}" if match else message
            )
        return "\n".join(lines) if lines else "clingo failed without a message"


@contextmanager
def map_clingo_errors(log: MessageLog, stage: str) -> Iterator[None]:
    """Turn clingo's RuntimeError for `stage` ("parse" or "ground") into our error with locations."""
    before = len(log.messages)
    try:
        yield
    except RuntimeError as exc:
        del log.messages[:before]
        error = LogicSyntaxError if stage == "parse" and "parsing failed" in str(exc) else GroundingError
        if "unsafe variables" in log.summary():
            error = GroundingError
        raise error(log.summary()) from None
