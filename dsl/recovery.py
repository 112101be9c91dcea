"""Syntax errors of the .cca parser as diagnostics, and where to resume after one.

`syntax_diagnostic` words a lark error for people (unknown field with a did-you-mean, the block
it happened in, what was expected); `blank_after_error` hides the offending line, or the whole
top-level block when blanking the line would unbalance braces, so parsing can resume.
`refuse` turns away inputs not worth parsing (too large, binary).
"""

from __future__ import annotations

import re

from lark import Token, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ccattler.dsl.errors import ERROR, Diagnostic, did_you_mean, line_of
from ccattler.dsl.limits import MAX_SOURCE_BYTES  # sources larger are refused before parsing


def _diag(name, text, line, column, code, message, width=1, suggestion=None) -> Diagnostic:
    return Diagnostic(name, line, column, ERROR, code, message, line_of(text, line), width, suggestion)


def refuse(text: str, name: str) -> Diagnostic | None:
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


def error_offset(exc: UnexpectedInput, text: str) -> int:
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        return len(text)
    return exc.pos_in_stream if exc.pos_in_stream is not None else len(text)


def syntax_diagnostic(exc: UnexpectedInput, work: str, text: str, name: str,
                      texts: dict[str, str], bodies: dict[str, frozenset[str]]) -> Diagnostic:
    """A diagnostic for a lark error; `texts` maps terminal names to their literal text and
    `bodies` block keywords to the fields their bodies take (for "goes inside" hints)."""
    expected = sorted(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    expected_words = sorted({_NAMED[t] if t in _NAMED else texts.get(t, t.lower()) for t in expected} - {""})
    opened = _opened(getattr(exc, "state", None), texts)
    context = " of ".join(f'{kw} "{n}"' if n else kw for kw, n in reversed(opened))
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
        hint = _belongs_inside(value, opened[-1][0], bodies) if opened else None
        return _diag(name, text, token.line, token.column, "unknown-field",
                     f'unknown {what} "{value}"{where}', len(value),
                     hint or did_you_mean(value, fields) or _expected(expected_words))
    hint = _expected(expected_words)
    if value == "}" and not opened:
        hint = "no block is open here (one } too many?)"
    elif value.endswith(":") and value[:-1] in fields:
        hint = f"drop the colon: {value[:-1]} VALUE (or {value[:-1]} = VALUE)"
    elif token.type == "STRING" and "WORD" in expected and "STRING" not in expected:
        hint = f"write it without quotes: {value[1:-1]}"
    shown = value if len(value) < 40 else value[:37] + "..."
    return _diag(name, text, token.line, token.column, "syntax",
                 f'unexpected "{shown}"{where}', max(1, len(value)), hint)


def _belongs_inside(word: str, block: str, bodies: dict[str, frozenset[str]]) -> str | None:
    """`"zone" goes inside placement { … }` when a block of `block` takes `word`."""
    for inner in sorted(bodies.get(block, ())):
        if inner != block and word in bodies.get(inner, ()):
            return f'"{word}" goes inside {inner} {{ … }}'
    return None


_NAMED = {"WORD": "a value", "STRING": 'a "string"', "TRIPLE": 'a """text"""', "_SEP": "",
          "_EQ": "=", "$END": "end of file"}


def _expected(words: list[str]) -> str | None:
    if not words:
        return None
    if len(words) > 12:
        return f"expected one of: {', '.join(words[:12])}, …"
    return f"expected {words[0]}" if len(words) == 1 else f"expected one of: {', '.join(words)}"


def _opened(state, texts: dict[str, str]) -> list[tuple[str, str | None]]:
    """The blocks open where the parser stopped, outermost first, as (keyword, name or None)."""
    stack = getattr(state, "value_stack", None) or []
    keywords = {name for name, text in texts.items() if re.fullmatch(r"[a-z_]+", text)}
    opened: list[tuple[str, str | None]] = []
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
            opened.append((stack[j].value if j >= 0 else "block", name))
    return opened


_SCAN = re.compile(r'"""[\s\S]*?(?:"""|$)|"(?:[^"\\\n]|\\.)*"?|(?:#|//)[^\n]*|[{}]')


def blank_after_error(text: str, offset: int) -> str:
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
