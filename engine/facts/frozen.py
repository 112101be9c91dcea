"""Read-only documents: what the runner's snapshots hand every controller (decoded once per revision
and shared), so a controller that mutates one fails loudly instead of changing what the others see.

`freeze(value)` turns decoded JSON into `FrozenDict` / `FrozenList`: subclasses of `dict` and `list`
(so `isinstance(x, dict)`, `==` with plain values and `json.dumps` behave as before) whose mutators
raise `ReadOnlyDocument` naming the key. Code that needs a changed copy says so with `thaw(value)`
(a deep plain copy) or `dict(value)` (shallow: nested values stay frozen).
docs/benchmarks.md "Frozen documents" has the cost per document.
"""

from __future__ import annotations

from typing import Any


class ReadOnlyDocument(TypeError):
    """A snapshot document was mutated in place; copy it first (`thaw()` or `dict(...)`)."""


def _refuse(operation: str, key: Any = None) -> ReadOnlyDocument:
    what = f"{operation} {key!r}" if key is not None else operation
    return ReadOnlyDocument(f"read-only snapshot document: cannot {what} (make a copy with thaw() or dict())")


class FrozenDict(dict):
    """A dict whose mutators raise `ReadOnlyDocument`; copying (`dict(d)`, `d | {...}`, `copy`) gives
    a plain dict."""

    __slots__ = ()

    def __setitem__(self, key, value):
        raise _refuse("set", key)

    def __delitem__(self, key):
        raise _refuse("delete", key)

    def __ior__(self, other):
        raise _refuse("update with |=")

    def setdefault(self, key, default=None):
        raise _refuse("setdefault", key)

    def pop(self, key, *default):
        raise _refuse("pop", key)

    def popitem(self):
        raise _refuse("popitem")

    def clear(self):
        raise _refuse("clear")

    def update(self, *args, **kwargs):
        keys = [*(args[0] if args and hasattr(args[0], "keys") else ()), *kwargs]
        raise _refuse("update", keys[0] if len(keys) == 1 else keys or None)

    def copy(self) -> dict:
        return dict(self)

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo) -> dict:
        return thaw(self)

    def __reduce__(self):
        return (FrozenDict, (dict(self),))


class FrozenList(list):
    """A list whose mutators raise `ReadOnlyDocument`; `list(x)`, `x + [...]` and slices are plain."""

    __slots__ = ()

    def __setitem__(self, index, value):
        raise _refuse("set item", index)

    def __delitem__(self, index):
        raise _refuse("delete item", index)

    def __iadd__(self, other):
        raise _refuse("extend with +=")

    def __imul__(self, other):
        raise _refuse("repeat with *=")

    def append(self, value):
        raise _refuse("append to a list")

    def extend(self, values):
        raise _refuse("extend a list")

    def insert(self, index, value):
        raise _refuse("insert into a list")

    def pop(self, index=-1):
        raise _refuse("pop from a list")

    def remove(self, value):
        raise _refuse("remove from a list")

    def clear(self):
        raise _refuse("clear a list")

    def sort(self, *args, **kwargs):
        raise _refuse("sort a list in place (use sorted())")

    def reverse(self):
        raise _refuse("reverse a list in place (use reversed())")

    def copy(self) -> list:
        return list(self)

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo) -> list:
        return thaw(self)

    def __reduce__(self):
        return (FrozenList, (list(self),))


def freeze(value: Any) -> Any:
    """`value` (decoded JSON) as read-only containers, all the way down; scalars are returned as they
    are, and an already frozen value is returned itself (no copy)."""
    kind = type(value)
    if kind is dict:
        return FrozenDict({k: v if type(v) in _SCALARS else freeze(v) for k, v in value.items()})
    if kind is list:
        return FrozenList([v if type(v) in _SCALARS else freeze(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """A deep plain (mutable) copy of `value`, frozen or not."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value


_SCALARS = frozenset({str, int, float, bool, type(None)})
