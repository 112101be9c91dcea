"""English for placement reason codes: one formatter per code, aggregated Nomad-style by count.

`summarize(rejects)` groups per-node `reject` reasons into `{"code", "args", "nodes"}` records
(what the placement controller stores); `describe(code, args)` words one of them; an unknown code
(e.g. from an operator extension) prints generically, never crashes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ccattler.engine.solve.decode import Reject


def _cpu(m: object) -> str:
    return f"{m}m"


def _mem(mib: object) -> str:
    if isinstance(mib, int) and mib >= 1024 and mib % 1024 == 0:
        return f"{mib // 1024}Gi"
    return f"{mib}Mi"


def _service(name: object) -> str:
    text = str(name)
    return text[len("default/"):] if text.startswith("default/") else text


def _pair(args: Sequence[object], i: int) -> object:
    return args[i] if len(args) > i else "?"


_FORMATTERS: dict[str, Callable[[Sequence[object]], str]] = {
    "missing_label": lambda a: f"missing label {_pair(a, 0)}={_pair(a, 1)}",
    "restricted": lambda a: f"node restricted to {_pair(a, 0)} (service does not accept it)",
    "wrong_zone": lambda a: f"not in zone {_pair(a, 0)}" + (
        f" (node zone: {a[1] or 'none'})" if len(a) > 1 else ""),
    "wrong_architecture": lambda a: f"architecture is not {_pair(a, 0)}" + (
        f" (node: {a[1] or 'unknown'})" if len(a) > 1 else ""),
    "node_not_ready": lambda a: f"node {_pair(a, 0)}",
    "insufficient_cpu": lambda a: f"insufficient cpu (need {_cpu(_pair(a, 0))}, free {_cpu(_pair(a, 1))})",
    "insufficient_memory": lambda a: (
        f"insufficient memory (need {_mem(_pair(a, 0))}, free {_mem(_pair(a, 1))})"
    ),
    "prefers_label": lambda a: f"has room, but the service prefers label {_pair(a, 0)}={_pair(a, 1)}",
    "separate_from": lambda a: f"has room, but runs {_service(_pair(a, 0))} (separate)",
    "colocate_with": lambda a: f"has room, but does not run {_service(_pair(a, 0))} (colocate)",
    "not_chosen": lambda a: "has room; other nodes scored better (spread, balance or solver budget)",
    "placed_earlier": lambda a: "has room; the replicas were placed earlier and stay (see: if re-placed now)",
    "no_nodes": lambda a: "the cluster has no nodes",
}

#: The codes this module words; anything else is printed generically.
KNOWN_CODES = frozenset(_FORMATTERS)


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, int | str) else str(value)


def describe(code: str, args: Sequence[object], nodes: int = 1) -> str:
    """One reason in English (`nodes` > 1: a capacity reason's free figure is the largest)."""
    formatter = _FORMATTERS.get(code)
    if formatter is None:
        shown = ", ".join(str(a) for a in args)
        return f"{code}({shown})" if shown else code
    text = formatter(args)
    return text.replace(", free ", ", most free ") if code in _CAPACITY and nodes > 1 else text


#: Capacity reasons are grouped by what was needed; their "free" argument becomes the most free.
_CAPACITY = frozenset({"insufficient_cpu", "insufficient_memory"})
#: Mismatch reasons are grouped by what was wanted; what nodes have is kept only when it is one value.
_MISMATCH = frozenset({"wrong_zone", "wrong_architecture"})


def summarize(rejects: Iterable[Reject]) -> list[dict[str, Any]]:
    """Per-node reasons grouped by (code, args) with node counts, most nodes first; capacity
    reasons are grouped by (code, need) and report the most free capacity among their nodes,
    zone and architecture mismatches by (code, wanted value)."""
    counts: Counter[tuple[str, tuple[object, ...]]] = Counter()
    most_free: dict[tuple[str, object], int] = {}
    has: dict[tuple[str, object], set[object]] = {}
    for reject in rejects:
        code, args = str(reject.code), tuple(_plain(a) for a in reject.arguments)
        if code in _CAPACITY and len(args) == 2 and isinstance(args[1], int):
            key = (code, args[0])
            most_free[key] = max(most_free.get(key, args[1]), args[1])
            args = (args[0],)
        elif code in _MISMATCH and len(args) == 2:
            has.setdefault((code, args[0]), set()).add(args[1])
            args = (args[0],)
        counts[code, args] += 1
    records = []
    for (code, args), n in counts.items():
        if code in _CAPACITY and len(args) == 1 and (code, args[0]) in most_free:
            args = (args[0], most_free[code, args[0]])
        elif code in _MISMATCH and len(args) == 1 and len(has.get((code, args[0]), ())) == 1:
            args = (args[0], next(iter(has[code, args[0]])))
        records.append({"code": code, "args": list(args), "nodes": n})
    return sorted(records, key=lambda r: (-r["nodes"], r["code"], str(r["args"])))


def render(record: Mapping[str, Any]) -> str:
    """`3 nodes: missing label gpu=true` for one summarized record."""
    nodes = record.get("nodes", 1)
    noun = "node" if nodes == 1 else "nodes"
    if record.get("code") == "no_nodes":
        return describe("no_nodes", ())
    return f"{nodes} {noun}: {describe(str(record.get('code')), list(record.get('args') or ()), nodes)}"
