"""The .cca syntax tree: frozen dataclasses with source positions, one `Node` per block or field.

Every block and field has the same shape — a keyword, an optional `KEY =`, arguments, an optional
`{ body }` — because the grammar fixes each field's signature; the compiler reads the arguments
by field and the formatter prints any node the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Span(NamedTuple):
    """Where a piece of source sits: 1-based line and column, 0-based character offsets.

    A NamedTuple rather than a frozen dataclass: one is built per token, and this is 2x cheaper.
    """

    line: int
    column: int
    end_line: int
    end_column: int
    start: int
    end: int

    def to(self, other: Span) -> Span:
        """The span from the start of this one to the end of `other`."""
        return Span(self.line, self.column, other.end_line, other.end_column, self.start, other.end)


@dataclass(frozen=True, slots=True)
class Scalar:
    """One value as written: a bare word, a "string", a \"\"\"text\"\"\" block or `from "file"`."""

    style: str  # "word" | "string" | "text" | "from"
    raw: str  # exactly as written, for the formatter
    value: str  # decoded: escapes applied, text dedented, the path of a `from`
    span: Span


@dataclass(frozen=True, slots=True)
class ListValue:
    """A list: `[a, b]` (policy operands) or `mon,tue` (schedule days)."""

    items: tuple[Scalar, ...]
    brackets: bool
    span: Span


@dataclass(frozen=True, slots=True)
class Flag:
    """A keyword inside a field's signature: `external`, `port`, `->`, `==`, `spread`, `to`."""

    word: str
    span: Span


Arg = Scalar | ListValue | Flag


@dataclass(frozen=True, slots=True)
class Node:
    """A block or field: `keyword [KEY =] args… [{ body }]` (`entry` is a bare `KEY = VALUE`)."""

    keyword: str
    key: Scalar | None
    args: tuple[Arg, ...]
    body: tuple[Node, ...] | None
    span: Span
    #: Offsets just after `{` and at `}` when there is a body (comments inside go there).
    body_open: int = -1
    body_close: int = -1

    @property
    def keyword_span(self) -> Span:
        """Where the keyword is written (the whole node for a bare `KEY = VALUE` entry)."""
        if self.keyword == "entry":
            return self.span
        s = self.span
        width = len(self.keyword)
        return Span(s.line, s.column, s.line, s.column + width, s.start, s.start + width)

    @property
    def values(self) -> tuple[Scalar | ListValue, ...]:
        """The arguments that are values, in order (flags left out)."""
        return tuple(a for a in self.args if not isinstance(a, Flag))

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple(a.word for a in self.args if isinstance(a, Flag))

    def option(self, flag: str) -> Scalar | None:
        """The value right after `flag` (`port 443`, `weight 5`, `volume data`), if present."""
        for i, arg in enumerate(self.args):
            if isinstance(arg, Flag) and arg.word == flag and i + 1 < len(self.args):
                nxt = self.args[i + 1]
                return nxt if isinstance(nxt, Scalar) else None
        return None

    @property
    def name(self) -> Scalar | None:
        """A block's name: its first value (`service web` → `web`)."""
        first = self.args[0] if self.args else None
        return first if isinstance(first, Scalar) else None

    def fields(self, keyword: str) -> list[Node]:
        return [n for n in self.body or () if n.keyword == keyword]


@dataclass(frozen=True, slots=True)
class Comment:
    """A `#` or `//` comment, kept so that `cca fmt` writes it back."""

    text: str
    span: Span
    own_line: bool  # nothing but whitespace before it on its line


@dataclass(frozen=True, slots=True)
class File:
    """One parsed .cca source: its top-level blocks and comments, in source order."""

    name: str
    text: str
    blocks: tuple[Node, ...]
    comments: tuple[Comment, ...]
