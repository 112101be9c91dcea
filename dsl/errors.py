"""Diagnostics of the .cca language (file:line:col, message, caret line, suggestion) and `DslError`.

Every problem the parser, compiler, linter or template renderer finds becomes a `Diagnostic`;
`DslError` carries all of them so a user sees every error of every file at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from ccattler.engine.facts import CcaError

ERROR = "error"
WARNING = "warning"
_WINDOW = 160  # characters of a source line shown under a diagnostic


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding: where, how bad, what, and (when we can tell) how to fix it."""

    file: str
    line: int
    column: int
    severity: str  # "error" | "warning"
    code: str  # stable class name, e.g. "unknown-field", "bad-quantity"
    message: str
    source_line: str = ""
    width: int = 1  # characters to underline
    suggestion: str | None = None

    @property
    def location(self) -> str:
        """`file:line:col`, or just `file` for problems of a whole file (line 0)."""
        return f"{self.file}:{self.line}:{self.column}" if self.line else self.file

    def render(self) -> str:
        """`file:line:col: error: message`, the offending line, a caret, and the suggestion."""
        head = f"{self.location}: {self.severity}: {self.message}"
        if self.suggestion:
            head += f"; {self.suggestion}"
        if not self.source_line:
            return head
        source, column = self.source_line, self.column
        if len(source) > _WINDOW:  # show the part of a very long line around the column
            start = max(0, column - 1 - _WINDOW // 2)
            source = ("…" if start else "") + source[start : start + _WINDOW] + "…"
            column = column - start + (1 if start else 0)
        line = source.expandtabs(4)
        prefix = source[: column - 1].expandtabs(4)
        caret = " " * len(prefix) + "^" * max(1, min(self.width, len(line) - len(prefix), _WINDOW))
        return f"{head}\n    {line.rstrip()}\n    {caret}"

    def to_json(self) -> dict:
        return asdict(self)


class DslError(CcaError):
    """One or more .cca sources are invalid; `.diagnostics` lists every problem found."""

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        self.diagnostics = tuple(diagnostics)
        super().__init__(render_all(self.diagnostics))


def render_all(diagnostics: Iterable[Diagnostic]) -> str:
    diagnostics = list(diagnostics)
    errors = sum(d.severity == ERROR for d in diagnostics)
    body = "\n".join(d.render() for d in diagnostics)
    if errors > 1:
        body += f"\n{errors} errors"
    return body


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """`did you mean "x"?` for the closest candidate, or None when nothing is close."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return f'did you mean "{close[0]}"?' if close else None


def line_of(text: str, line: int) -> str:
    """The text of 1-based `line` (without its newline), or "" past the end."""
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return ""
    end = text.find("\n", start)
    return text[start:] if end < 0 else text[start:end]
