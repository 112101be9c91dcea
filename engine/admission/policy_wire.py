"""The framed protocol between the API server and its policy workers (policy_pool.py, policy_worker.py).

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. Symbols travel as typed
JSON trees, never as program text: a number is an int, a string a str, a function or constant
`[name, [args…]]` (`[name, [args…], 0]` when negated), a tuple `["", [args…]]`, `#inf`/`#sup`
`["#inf"]`/`["#sup"]`. Both ends rebuild them with clingo's symbol constructors, so facts enter the
worker's Control through the backend and the server never parses what a policy derived.
"""

from __future__ import annotations

import json
import struct
from functools import lru_cache
from typing import Any, BinaryIO

from clingo import Function, Infimum, Number, String, Supremum, Symbol, SymbolType

_HEADER = struct.Struct(">I")


class WireError(Exception):
    """A frame that is too large, cut short or not the JSON it should be."""


def write_frame(stream: BinaryIO, message: Any) -> None:
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape")
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def frame_length(header: bytes, limit: int) -> int:
    """The body length a header announces, refused past `limit` bytes."""
    if len(header) != _HEADER.size:
        raise WireError("the frame was cut short")
    (length,) = _HEADER.unpack(header)
    if length > limit:
        raise WireError(f"a frame of {length} bytes, more than the {limit} allowed")
    return length


def decode_frame(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError) as exc:
        raise WireError(f"not a JSON frame ({type(exc).__name__})") from None


def read_frame(stream: BinaryIO, limit: int) -> Any:
    """Blocking read of one frame (the worker's side; the server reads with a deadline)."""
    length = frame_length(stream.read(_HEADER.size), limit)
    body = stream.read(length)
    if len(body) != length:
        raise WireError("the frame was cut short")
    return decode_frame(body)


def encode_symbol(sym: Symbol, memo: dict[Symbol, Any]) -> Any:
    """`sym` as a JSON tree; `memo` shares the trees of repeated symbols within one request."""
    found = memo.get(sym)
    if found is not None:
        return found
    kind = sym.type
    if kind is SymbolType.Number:
        tree: Any = sym.number
    elif kind is SymbolType.String:
        tree = sym.string
    elif kind is SymbolType.Function:
        args = [encode_symbol(a, memo) for a in sym.arguments]
        tree = [sym.name, args] if sym.positive else [sym.name, args, 0]
    else:
        tree = ["#inf"] if kind is SymbolType.Infimum else ["#sup"]
    memo[sym] = tree
    return tree


#: Names and constants recur in every fact about them: build each symbol once (a foreign call).
_string = lru_cache(maxsize=1 << 16)(String)
_number = lru_cache(maxsize=1 << 12)(Number)


@lru_cache(maxsize=1 << 12)
def _constant(name: str, positive: bool) -> Symbol:
    return Function(name, [], positive)


def decode_symbol(tree: Any) -> Symbol:
    """The symbol a JSON tree stands for; anything else raises `WireError`."""
    if isinstance(tree, bool):
        raise WireError("a boolean is not a symbol")
    if isinstance(tree, int):
        if not -(2**31) <= tree < 2**31:
            raise WireError(f"the number {tree} does not fit clingo's 32 bits")
        return _number(tree)
    if isinstance(tree, str):
        return _string(tree)
    if isinstance(tree, list) and tree and isinstance(tree[0], str):
        if len(tree) == 1 and tree[0] in ("#inf", "#sup"):
            return Infimum if tree[0] == "#inf" else Supremum
        if len(tree) in (2, 3) and isinstance(tree[1], list):
            if not tree[1] and tree[0]:
                return _constant(tree[0], len(tree) == 2)
            try:
                return Function(tree[0], [decode_symbol(a) for a in tree[1]], len(tree) == 2)
            except RecursionError:
                raise WireError("a symbol nested too deeply") from None
    raise WireError(f"not a symbol: {str(tree)[:80]}")
