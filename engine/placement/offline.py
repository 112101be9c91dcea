"""`cca plan` without a cluster: compiled facts → simulated nodes → instance and placement
controllers settled in an in-memory store → a `PlanReport` (rich table or the JSON contract).

Node blocks with a `capacity` become `observed/node` facts of simulated nodes, as an agent would
report them. The knob is `PlanOptions` (solver budget, extension directories).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.facts import display_name
from ccattler.engine.facts.keys import (
    DERIVED,
    DESIRED,
    DESIRED_NODES,
    OBSERVED,
    OBSERVED_NODES,
    PLACEMENTS,
)
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.placement.controller import PlacementController
from ccattler.engine.placement.model import Cluster
from ccattler.engine.placement.reasons import render
from ccattler.engine.placement.run import PlanOptions
from ccattler.engine.runner import read_snapshot, settle
from ccattler.engine.store.url import open_store

#: Keys a plan reads back from the settled store.
PLAN_PREFIXES = (DESIRED, OBSERVED, DERIVED)
#: Facts per initial transaction (the embedded store's limit is larger; this bounds memory).
_BATCH = 5000


def simulated_nodes(facts: Mapping[str, Any]) -> dict[str, Any]:
    """An `observed/node/<n>` document for every `desired/node/<n>` that declares a capacity."""
    observed = {}
    for key, doc in facts.items():
        if not key.startswith(DESIRED_NODES) or not doc.get("capacity"):
            continue
        name = key[len(DESIRED_NODES):]
        observed[f"{OBSERVED_NODES}{name}"] = {
            "capacity": doc["capacity"], "labels": doc.get("labels") or {}, "zone": doc.get("zone"),
            "architecture": doc.get("architecture") or "amd64",
            "restrictions": doc.get("restrictions") or [], "address": "simulated",
        }
    return observed


def simulate(facts: Mapping[str, Any], options: PlanOptions | None = None) -> Snapshot:
    """Settle the instance and placement controllers over `facts`; the final snapshot."""
    everything = {**facts, **simulated_nodes(facts)}
    store = open_store("sqlite://:memory:")
    try:
        items = sorted(everything.items())
        for start in range(0, len(items), _BATCH):
            store.txn((), items[start:start + _BATCH], ())
        settle(store, [InstanceController(), PlacementController(options)], now=0.0)
        return read_snapshot(store, PLAN_PREFIXES)
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class Placed:
    instance: str
    service: str
    node: str


@dataclass(frozen=True, slots=True)
class Unplaced:
    instance: str
    service: str
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """What a node ends up with: instances and requested cpu (millicores) / memory (MiB)."""

    node: str
    zone: str | None
    instances: int
    cpu: int
    cpu_capacity: int
    memory: int
    memory_capacity: int


def _percent(used: int, capacity: int) -> str:
    return f"{used * 100 // capacity}%" if capacity else "-"


def _mem(mib: int) -> str:
    return f"{mib / 1024:.1f}Gi" if mib >= 1024 else f"{mib}Mi"


@dataclass(frozen=True, slots=True)
class PlanReport:
    """Where every instance goes; renders itself as a table (`__rich__`) or the JSON contract."""

    placements: tuple[Placed, ...]
    unplaced: tuple[Unplaced, ...]
    nodes: int
    loads: tuple[NodeLoad, ...] = ()

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> PlanReport:
        placed, unplaced = [], []
        for key, doc in snapshot.under(PLACEMENTS):
            tenant = key.split("/")[2]
            instance = display_name(tenant, doc["instance"])
            service = display_name(*doc["service"].split("/", 1))
            if doc.get("node") is None:
                reasons = tuple(render(r) for r in doc.get("reasons") or ())
                unplaced.append(Unplaced(instance, service, reasons))
            else:
                placed.append(Placed(instance, service, doc["node"]))
        cluster = Cluster.from_snapshot(snapshot)
        order = lambda p: (p.service, p.instance)  # noqa: E731
        return cls(tuple(sorted(placed, key=order)), tuple(sorted(unplaced, key=order)),
                   len(cluster.nodes), _loads(cluster))

    def to_json(self) -> dict[str, Any]:
        return {
            "placements": [{"instance": p.instance, "service": p.service, "node": p.node}
                           for p in self.placements],
            "unplaced": [{"instance": u.instance, "service": u.service, "reasons": list(u.reasons)}
                         for u in self.unplaced],
        }

    def __rich__(self) -> Group:
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in ("SERVICE", "INSTANCE", "NODE"):
            table.add_column(column)
        for p in self.placements:
            table.add_row(p.service, p.instance, p.node)
        parts: list[Any] = [table] if self.placements else []
        if self.unplaced:
            missing = Table(box=None, header_style="bold red", pad_edge=False)
            for column in ("SERVICE", "INSTANCE", "WHY NOT PLACED"):
                missing.add_column(column)
            for u in self.unplaced:
                missing.add_row(u.service, u.instance, "\n".join(u.reasons) or "no node has room")
            parts += [Text(""), missing] if parts else [missing]
        if self.loads and self.placements:
            nodes = Table(box=None, header_style="bold", pad_edge=False)
            for column in ("NODE", "ZONE", "INSTANCES", "CPU", "MEMORY"):
                nodes.add_column(column)
            for n in self.loads:
                nodes.add_row(
                    n.node, n.zone or "-", str(n.instances),
                    f"{n.cpu}m/{n.cpu_capacity}m ({_percent(n.cpu, n.cpu_capacity)})",
                    f"{_mem(n.memory)}/{_mem(n.memory_capacity)} ({_percent(n.memory, n.memory_capacity)})",
                )
            parts += [Text(""), nodes]
        summary = (f"{len(self.placements)} placed, {len(self.unplaced)} unplaced "
                   f"on {self.nodes} node{'s' if self.nodes != 1 else ''}")
        parts += [Text(""), Text(summary, style="bold" if not self.unplaced else "bold yellow")]
        return Group(*parts)


def _loads(cluster: Cluster) -> tuple[NodeLoad, ...]:
    counts: dict[str, list[int]] = {name: [0, 0, 0] for name in cluster.nodes}
    for inst in cluster.instances:
        if inst.node in counts:
            totals = counts[inst.node]
            totals[0] += 1
            totals[1] += inst.cpu
            totals[2] += inst.mem
    return tuple(
        NodeLoad(name, node.zone, counts[name][0], counts[name][1], node.cpu, counts[name][2], node.mem)
        for name, node in sorted(cluster.nodes.items())
    )
