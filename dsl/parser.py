"""Parse .cca text into the syntax tree (`parse`), reporting every syntax error of a file.

The lark LALR parser (grammar.lark, with the contextual lexer of lexer.py) is built once per
process from lark's table cache; an inline transformer builds `ast.Node`s while parsing, so no
parse tree is walked twice. After a syntax error the offending line (or, when blanking it would
unbalance the braces, the whole top-level block) is blanked and parsing resumes, up to
`MAX_ERRORS` errors.
"""

from __future__ import annotations

import gc
import re
import textwrap
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from lark import Lark, Token, Tree, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ccattler.dsl.ast import Comment, File, Flag, ListValue, Node, Scalar, Span
from ccattler.dsl.errors import ERROR, Diagnostic, DslError, did_you_mean, line_of
from ccattler.dsl.lexer import CcaLexer, collected

#: Sources larger than this are refused before parsing.
MAX_SOURCE_BYTES = 4 * 1024 * 1024
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
    return Lark(
        _GRAMMAR.read_text(),
        start="cca",
        parser="lalr",
        lexer=CcaLexer,
        keep_all_tokens=True,
        transformer=_Builder(),
        cache=True,  # the LALR tables, pickled in the temp dir: 0.1 s to load instead of 0.8 s to build
    )


@cache
def keyword_terminals() -> dict[str, str]:
    """Terminal name → keyword text, for every keyword of the language."""
    return {name: text for name, text in _terminal_texts().items() if re.fullmatch(r"[a-z_]+", text)}


@cache
def _terminal_texts() -> dict[str, str]:
    """Terminal name → its literal text, for every fixed-string terminal (`->`, `==`, `port`)."""
    return {t.name: t.pattern.value for t in _parser().terminals if t.pattern.type == "str"}


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
    refusal = _refuse(text, name)
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
            diagnostics.append(_syntax_diagnostic(exc, work, text, name))
            if len(diagnostics) >= MAX_ERRORS:
                diagnostics.append(Diagnostic(name, 0, 0, ERROR, "too-many-errors",
                                              f"stopped after {MAX_ERRORS} syntax errors"))
                return File(name, text, (), ()), diagnostics
            work = _blank_after_error(work, _error_offset(exc, work))
        except RecursionError:
            return File(name, text, (), ()), [_diag(name, text, 1, 1, "too-deep", "nesting is too deep")]
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


def _diag(name, text, line, column, code, message, width=1, suggestion=None) -> Diagnostic:
    return Diagnostic(name, line, column, ERROR, code, message, line_of(text, line), width, suggestion)


def _refuse(text: str, name: str) -> Diagnostic | None:
    """Inputs not worth parsing: too large, or binary."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        return Diagnostic(name, 0, 0, ERROR, "too-large",
                          f"file is {size} bytes; the limit is {MAX_SOURCE_BYTES // (1024 * 1024)} MiB")
    bad = re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        return _diag(name, text, line, column, "binary",
                     f"control character {bad.group()!r} in the source; is this a binary file?")
    return None


def _error_offset(exc: UnexpectedInput, text: str) -> int:
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        return len(text)
    return exc.pos_in_stream if exc.pos_in_stream is not None else len(text)


def _syntax_diagnostic(exc: UnexpectedInput, work: str, text: str, name: str) -> Diagnostic:
    expected = sorted(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    texts = _terminal_texts()
    expected_words = sorted({_NAMED[t] if t in _NAMED else texts.get(t, t.lower()) for t in expected} - {""})
    context = _context(getattr(exc, "state", None))
    where = f" in {context}" if context else ""
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream
        char = work[pos]
        if work.startswith('"""', pos):
            return _diag(name, text, exc.line, exc.column, "unterminated-string",
                         'unterminated text block: """ without a closing """', 3)
        if char == '"':
            return _diag(name, text, exc.line, exc.column, "unterminated-string",
                         "unterminated string: no closing \" on this line", 1,
                         'close it with " or use """ for text over several lines')
        return _diag(name, text, exc.line, exc.column, "syntax",
                     f"unexpected character {char!r}{where}", 1, _expected(expected_words))
    token = exc.token
    if token.type == "$END":
        line = text.count("\n") + 1
        column = len(text) - (text.rfind("\n") + 1) + 1
        missing = ': a "}" is missing' if "}" in expected_words else ""
        return _diag(name, text, line, column, "syntax",
                     f"unexpected end of file{where}{missing}", 1, _expected(expected_words))
    value = str(token.value)
    fields = [w for w in expected_words if re.fullmatch(r"[a-z_]+", w)]
    if re.fullmatch(r"[A-Za-z_][\w.\-]*", value) and fields and "WORD" not in expected:
        what = "block" if not context else "field"
        return _diag(name, text, token.line, token.column, "unknown-field",
                     f'unknown {what} "{value}"{where}', len(value),
                     did_you_mean(value, fields) or _expected(expected_words))
    shown = value if len(value) < 40 else value[:37] + "..."
    return _diag(name, text, token.line, token.column, "syntax",
                 f'unexpected "{shown}"{where}', max(1, len(value)), _expected(expected_words))


_NAMED = {"WORD": "a value", "STRING": 'a "string"', "TRIPLE": 'a """text"""', "_SEP": "",
          "_EQ": "=", "$END": "end of file"}


def _expected(words: list[str]) -> str | None:
    if not words:
        return None
    if len(words) > 12:
        return f"expected one of: {', '.join(words[:12])}, …"
    return f"expected {words[0]}" if len(words) == 1 else f"expected one of: {', '.join(words)}"


def _context(state) -> str:
    """`service "web"` / `resources of service "web"`: the blocks open where the parser stopped."""
    stack = getattr(state, "value_stack", None) or []
    keywords = keyword_terminals()
    opened: list[str] = []
    for i, item in enumerate(stack):
        if not isinstance(item, Token):
            continue
        if item.type == "RBRACE" and opened:
            opened.pop()
        elif item.type == "LBRACE":
            j, name = i - 1, None
            while j >= 0 and not (isinstance(stack[j], Token) and stack[j].type in keywords):
                if isinstance(stack[j], Token) and stack[j].type in ("WORD", "STRING"):
                    name = stack[j].value
                j -= 1
            label = stack[j].value if j >= 0 else "block"
            opened.append(f'{label} "{name}"' if name else label)
    return " of ".join(reversed(opened))


_SCAN = re.compile(r'"""[\s\S]*?(?:"""|$)|"(?:[^"\\\n]|\\.)*"?|(?:#|//)[^\n]*|[{}]')


def _blank_after_error(text: str, offset: int) -> str:
    """Blank the line of `offset` if its braces balance, else the top-level block holding it."""
    line_start = text.rfind("\n", 0, offset) + 1 if offset < len(text) else offset
    line_end = text.find("\n", offset)
    line_end = len(text) if line_end < 0 else line_end
    line = text[line_start:line_end]
    if offset < len(text) and _brace_balance(line) == 0 and '"""' not in line:
        return text[:line_start] + _spaces(line) + text[line_end:]
    start, end = _top_level_range(text, offset)
    end = max(end, min(offset + 1, len(text)))
    return text[:start] + _spaces(text[start:end]) + text[end:]


def _spaces(chunk: str) -> str:
    return re.sub(r"[^\n]", " ", chunk)


def _brace_balance(chunk: str) -> int:
    depth = 0
    for m in _SCAN.finditer(chunk):
        depth += {"{": 1, "}": -1}.get(m.group(), 0)
    return depth


def _top_level_range(text: str, offset: int) -> tuple[int, int]:
    """The [start, end) of the top-level block around `offset` (to the end when unclosed)."""
    depth = 0
    block_start = 0
    for m in _SCAN.finditer(text):
        tok = m.group()
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth = max(0, depth - 1)
            if depth == 0:
                if m.end() > offset:
                    return block_start, m.end()
                block_start = m.end()
    return block_start, len(text)
