"""`.ccv` values files: `key = value` lines in the attribute syntax, dotted keys nesting.

Values are "strings", integers, decimals, true/false, bare words or [lists]; `#` and `//` start
comments. `merge` layers one set of values over another (later wins, nested dicts merge).
"""

from __future__ import annotations

import re
from typing import Any

from ccattler.dsl.errors import ERROR, Diagnostic, DslError, line_of
from ccattler.dsl.parser import decode_string

_LINE = re.compile(r"\s*([A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*)\s*=[ \t]*(.*)\Z")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_KEY = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*\Z")


def parse_scalar(text: str) -> Any:
    """`"x"` → str, `3` → int, `1.5` → float, `true` → bool, `[a, "b"]` → list, else the word."""
    if text.startswith('"'):
        if not _STRING.fullmatch(text):
            raise ValueError("unterminated string" if text.count('"') < 2 else f"cannot read value {text}")
        return decode_string(text)
    if text.startswith("["):
        inner = text[1:-1].strip()
        return [parse_scalar(part.strip()) for part in _split_list(inner)] if inner else []
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d+", text):
        return float(text)
    if text in ("true", "false"):
        return text == "true"
    if text and not re.search(r'[\s"\[\]]', text):
        return text
    raise ValueError(f"cannot read value {text!r}")


def _split_list(inner: str) -> list[str]:
    parts, depth, current, quoted = [], 0, "", False
    for ch in inner:
        if ch == '"' and not current.endswith("\\"):
            quoted = not quoted
        if ch == "," and not quoted and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]


def _strip_comment(line: str) -> str:
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and (ch == "#" or line.startswith("//", i)):
            return line[:i]
    return line


def set_dotted(values: dict, key: str, value: Any) -> None:
    """`values["a"]["b"] = value` for key `a.b`, creating the nested dicts."""
    *parents, last = key.split(".")
    node = values
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[last] = value


def parse_values(text: str, name: str) -> dict:
    """Read a .ccv file; raise `DslError` naming file:line:col for every bad line."""
    values: dict = {}
    problems = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if not line.strip():
            continue
        m = _LINE.match(line)
        try:
            if not m:
                raise ValueError("expected key = value")
            set_dotted(values, m.group(1), parse_scalar(m.group(2).rstrip()))
        except ValueError as exc:
            column = (m.start(2) + 1) if m else len(raw) - len(raw.lstrip()) + 1
            problems.append(Diagnostic(name, number, column, ERROR, "bad-values", str(exc),
                                       line_of(text, number)))
    if problems:
        raise DslError(problems)
    return values


def check_key(key: str) -> str:
    if not _KEY.match(key):
        raise DslError([Diagnostic("--set", 0, 0, ERROR, "bad-values",
                                   f"{key!r} is not a valid key (letters, digits, _ - and dots)")])
    return key


def merge(base: dict, over: dict) -> dict:
    """A new dict: `over` layered on `base`, nested dicts merged key by key."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
