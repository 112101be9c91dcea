"""Typed conversion between Python values and clingo symbols (facts enter through the backend).

`atom("node_cap", "n1", 8000, 32768)` builds `node_cap("n1",8000,32768)`: str → String, int →
Number (checked to fit 32 bits), tuple → Tuple, `Const("a")` → the constant `a`, a Symbol as is.
`to_python` is the inverse used by the decoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from clingo import Function, Number, String, Symbol, SymbolType, Tuple_

from ccattler.engine.solve.errors import SymbolRangeError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True, slots=True)
class Const:
    """A clingo constant (a lowercase name such as a reason code), as opposed to a string."""

    name: str

    def __str__(self) -> str:
        return self.name


@lru_cache(maxsize=1 << 16)
def _string(value: str) -> Symbol:
    """Names (nodes, services) recur in every fact about them; build each String symbol once."""
    return String(value)


def to_symbol(value: object) -> Symbol:
    """One Python value as a clingo symbol."""
    if isinstance(value, Symbol):
        return value
    if isinstance(value, bool):
        return Function("true" if value else "false")
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise SymbolRangeError(f"integer {value} does not fit clingo's 32 bits (use MiB, millicores)")
        return Number(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Const):
        return Function(value.name)
    if isinstance(value, tuple):
        return Tuple_([to_symbol(v) for v in value])
    raise SymbolRangeError(f"cannot pass {type(value).__name__} {value!r} to clingo")


def atom(name: str, *args: object) -> Symbol:
    """The atom `name(args…)` with each argument converted by `to_symbol`."""
    return Function(name, [to_symbol(a) for a in args])


def to_python(sym: Symbol) -> object:
    """A symbol as a plain value: Number → int, String → str, constant → Const, tuple → tuple;
    any other compound term stays a Symbol (callers that expect one read it themselves)."""
    kind = sym.type
    if kind is SymbolType.Number:
        return sym.number
    if kind is SymbolType.String:
        return sym.string
    if kind is SymbolType.Function:
        if not sym.arguments:
            return Const(sym.name) if sym.name else ()
        if not sym.name:
            return tuple(to_python(a) for a in sym.arguments)
    return sym
