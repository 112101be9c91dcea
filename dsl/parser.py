"""Parse .cca text into the syntax tree (`parse`), reporting every syntax error of a file.

The lark LALR parser (grammar.lark, with the contextual lexer of lexer.py) is built once per
process, from tables cached under $XDG_CACHE_HOME/ccattler (default ~/.cache/ccattler); an
inline transformer builds `ast.Node`s while parsing, so no parse tree is walked twice. After a
syntax error the offending line (or, when blanking it would unbalance the braces, the whole
top-level block) is blanked and parsing resumes, up to `MAX_ERRORS` errors.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
import textwrap
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import lark
from lark import Lark, Token, Tree, UnexpectedInput

from ccattler.dsl.ast import Comment, File, Flag, ListValue, Node, Scalar, Span
from ccattler.dsl.errors import ERROR, Diagnostic, DslError, line_of
from ccattler.dsl.lexer import CcaLexer, collected
from ccattler.dsl.recovery import (
    blank_after_error,
    error_offset,
    refuse,
    syntax_diagnostic,
)

#: Syntax errors reported per file before giving up on it.
MAX_ERRORS = 20

_GRAMMAR = Path(__file__).with_name("grammar.lark")
_PUNCTUATION = frozenset({"LBRACE", "RBRACE", "_EQ", "_SEP", "COMMA", "LSQB", "RSQB"})
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(.)")


def _span(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line, tok.end_column, tok.start_pos, tok.end_pos)


def decode_string(raw: str) -> str:
    """The value of a "double quoted" token: `\\"`, `\\\\`, `\\n`, `\\t` decoded, others kept."""
    return _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), raw[1:-1])


def decode_text(raw: str) -> str:
    """The value of a \"\"\"text\"\"\" token: verbatim, minus the first newline, the closing
    line's indentation and the lines' common indentation."""
    body = raw[3:-3]
    if body.startswith("\n"):
        body = body[1:]
    last_newline = body.rfind("\n")
    if body[last_newline + 1 :].strip() == "":
        body = body[: last_newline + 1]
    return textwrap.dedent(body)


def _scalar(tok: Token) -> Scalar:
    kind = tok.type
    if kind == "STRING":
        return Scalar("string", tok.value, decode_string(tok.value), _span(tok))
    if kind == "TRIPLE":
        return Scalar("text", tok.value, decode_text(tok.value), _span(tok))
    return Scalar("word", tok.value, tok.value, _span(tok))


class _Key:
    """Marks the `KEY` of a `KEY = VALUE` field while the tree is built."""

    __slots__ = ("scalar",)

    def __init__(self, scalar: Scalar):
        self.scalar = scalar

    @property
    def span(self) -> Span:
        return self.scalar.span


class _Builder:
    """Inline lark transformer: grammar rules become `Node`s as the parser reduces them."""

    def key(self, children):
        return _Key(_scalar(children[0]))

    def v_list(self, children):
        items = tuple(_scalar(c) for c in children if c.type in ("WORD", "STRING"))
        return ListValue(items, True, _span(children[0]).to(_span(children[-1])))

    def cca(self, children):
        return tuple(c for c in children if isinstance(c, Node))

    def __default__(self, data, children, _meta):
        # Runs once per field of every parsed file: written for speed (type() checks, no helpers).
        if data[0] == "_":  # helper rules (templates, repetitions) are inlined by lark
            return Tree(data, children)
        keyword = _KEYWORDS.get(data) or _KEYWORDS.setdefault(data, data.split("__", 1)[0])
        first = children[0]
        if type(first) is Token:  # the keyword itself
            line, column, start = first.line, first.column, first.start_pos
            rest = children[1:]
        else:  # `KEY = VALUE` entries start with their key
            line, column, start = first.span.line, first.span.column, first.span.start
            rest = children
        key = body = pending_from = None
        args: list = []
        body_open = body_close = -1
        for child in rest:
            kind = type(child)
            if kind is Token:
                kind = child.type
                if kind == "WORD":
                    value = child.value
                    args.append(Scalar("word", value, value, Span(
                        child.line, child.column, child.end_line, child.end_column, child.start_pos,
                        child.end_pos)))
                elif kind == "STRING" or kind == "TRIPLE":
                    scalar = _scalar(child)
                    if pending_from is not None:
                        scalar = Scalar("from", f"from {child.value}", scalar.value,
                                        _span(pending_from).to(scalar.span))
                        pending_from = None
                    args.append(scalar)
                elif kind == "FROM":
                    pending_from = child
                elif kind == "LBRACE":
                    body = []
                    body_open = child.end_pos
                elif kind == "RBRACE":
                    body_close = child.start_pos
                elif kind not in _PUNCTUATION:
                    args.append(Flag(child.value, _span(child)))
            elif kind is Node:
                body.append(child)
            elif kind is _Key:
                key = child.scalar
            else:
                args.append(child)
        if keyword == "days":
            words = tuple(a for a in args if isinstance(a, Scalar))
            args = [ListValue(words, False, words[0].span.to(words[-1].span))]
        last = children[-1]
        if type(last) is Token:
            span = Span(line, column, last.end_line, last.end_column, start, last.end_pos)
        else:
            end = last.span
            span = Span(line, column, end.end_line, end.end_column, start, end.end)
        return Node(keyword, key, tuple(args), None if body is None else tuple(body), span,
                    body_open, body_close)


_KEYWORDS: dict[str, str] = {}


@cache
def _parser() -> Lark:
    grammar = _GRAMMAR.read_text()
    return Lark(
        grammar,
        start="cca",
        parser="lalr",
        lexer=CcaLexer,
        keep_all_tokens=True,
        transformer=_Builder(),
        cache=_cache_file(grammar),  # the LALR tables: 0.05 s to load instead of 0.8 s to build
    )


def _cache_file(grammar: str) -> str | bool:
    """Where lark keeps the built tables: our own user cache directory ($XDG_CACHE_HOME or
    ~/.cache), never the shared temp dir, because lark loads the file with pickle. False (build
    every time) when that directory cannot be made."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ccattler"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    info = base.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o022 or not os.access(base, os.W_OK):
        return False  # someone else could swap the pickle
    digest = hashlib.sha256(f"{lark.__version__}\n{grammar}".encode()).hexdigest()[:16]
    path = base / f"cca-grammar-{digest}.lark"
    if not path.exists():  # a new grammar or lark: drop the tables of the old ones
        for old in base.glob("cca-grammar-*.lark"):
            old.unlink(missing_ok=True)
    return str(path)


@cache
def _terminal_texts() -> dict[str, str]:
    """Terminal name → its literal text, for every fixed-string terminal (`->`, `==`, `port`)."""
    return {t.name: t.pattern.value for t in _parser().terminals if t.pattern.type == "str"}


@cache
def _bodies() -> dict[str, frozenset[str]]:
    """Block keyword → the field keywords its `{ body }` takes, read from the grammar's rules."""
    rules = _parser().rules
    alternatives: dict[str, set[str]] = {}
    for rule in rules:
        if len(rule.expansion) == 1 and not rule.expansion[0].is_term:
            alternatives.setdefault(rule.origin.name, set()).add(rule.expansion[0].name)

    def fields(group: str) -> set[str]:
        if not group.startswith("_"):
            return {group.split("__", 1)[0]}
        return set().union(*(fields(alt) for alt in alternatives.get(group, ())))

    bodies: dict[str, set[str]] = {}
    for rule in rules:
        if rule.origin.name.startswith("_"):
            continue
        for symbol in rule.expansion:
            m = re.fullmatch(r"_body\{(.+)\}", symbol.name)
            if m:
                bodies.setdefault(rule.origin.name.split("__", 1)[0], set()).update(fields(m.group(1)))
    return {block: frozenset(fs) for block, fs in bodies.items()}


def parse(text: str, name: str = "<text>") -> File:
    """Parse one source; raise `DslError` listing every syntax error."""
    file, diagnostics = parse_with_diagnostics(text, name)
    if diagnostics:
        raise DslError(diagnostics)
    return file


def parse_with_diagnostics(text: str, name: str = "<text>") -> tuple[File, list[Diagnostic]]:
    """Parse what can be parsed; syntax errors come back as diagnostics, never as exceptions.

    The returned file leaves out what could not be parsed (same offsets, blanked text).
    """
    text = text.replace("\r\n", "\n")
    refusal = refuse(text, name)
    if refusal:
        return File(name, text, (), ()), [refusal]
    work = text
    diagnostics: list[Diagnostic] = []
    while True:
        try:
            with _no_gc():
                blocks = _parser().parse(work)
            break
        except UnexpectedInput as exc:
            diagnostics.append(syntax_diagnostic(exc, work, text, name, _terminal_texts(), _bodies()))
            if len(diagnostics) >= MAX_ERRORS:
                diagnostics.append(Diagnostic(name, 0, 0, ERROR, "too-many-errors",
                                              f"stopped after {MAX_ERRORS} syntax errors"))
                return File(name, text, (), ()), diagnostics
            blanked = blank_after_error(work, error_offset(exc, work))
            if blanked == work:  # nothing left to skip: report what we have
                return File(name, text, (), ()), diagnostics
            work = blanked
        except RecursionError:
            return File(name, text, (), ()), [Diagnostic(name, 1, 1, ERROR, "too-deep", "nesting is too deep",
                                                         line_of(text, 1))]
    comments = tuple(_comment(tok, work) for tok in collected.comments)
    return File(name, text, blocks, comments), diagnostics


@contextmanager
def _no_gc():
    """Pause the cycle collector while parsing: the tree has no cycles, and collections triggered
    by its ~50k allocations cost a third of the parse time of a large file."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _comment(tok: Token, text: str) -> Comment:
    line_start = text.rfind("\n", 0, tok.start_pos) + 1
    own_line = text[line_start : tok.start_pos].strip() == ""
    return Comment(tok.value.rstrip(), _span(tok), own_line)


