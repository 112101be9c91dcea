"""The placement view of a snapshot: nodes, services, units, what is placed and what is pending.

`Cluster.from_snapshot(snapshot)` reads `observed/node` merged with `desired/node` (the desired
labels, restrictions and zone win), `derived/node` conditions, `desired/service`,
`derived/instance` and `derived/placement`. Quantities become millicores and MiB (requests
rounded up, capacities down) because clingo integers are 32-bit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ccattler.engine.controllers.base import Snapshot

MIB = 1024 * 1024
OBSERVED_NODES = "observed/node/"
DESIRED_NODES = "desired/node/"
NODE_CONDITIONS = "derived/node/"
SERVICES = "desired/service/"
INSTANCES = "derived/instance/"
PLACEMENTS = "derived/placement/"
GROUP_PREFIX = "group:"


def mib_up(nbytes: int) -> int:
    return -(-int(nbytes) // MIB)


@dataclass(frozen=True, slots=True)
class Node:
    """A node as placement sees it; `condition` is ready, down or draining."""

    name: str
    cpu: int
    mem: int
    zone: str | None = None
    arch: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    restrictions: tuple[str, ...] = ()
    condition: str = "ready"

    @property
    def shape(self) -> tuple[object, ...]:
        """What the static filter looks at: nodes with equal shapes pass or fail it together."""
        return (self.zone, self.arch, self.labels, self.restrictions)


@dataclass(frozen=True, slots=True)
class Service:
    """A service's placement request (per replica) and constraints."""

    name: str  # "tenant/name"
    cpu: int
    mem: int
    require: tuple[tuple[str, str], ...] = ()
    accept: tuple[str, ...] = ()
    zone: str | None = None
    arch: str | None = None
    spread: bool = False
    prefer: tuple[tuple[str, str, int], ...] = ()
    colocate: tuple[str, ...] = ()
    separate: tuple[str, ...] = ()
    group: str | None = None

    @property
    def unit(self) -> str:
        return f"{GROUP_PREFIX}{self.group}" if self.group else self.name


@dataclass(frozen=True, slots=True)
class Instance:
    """One derived instance and where it is placed now (None: not yet, or its node is gone)."""

    tenant: str
    name: str
    service: str
    ordinal: int | None
    cpu: int
    mem: int
    node: str | None
    key: str


@dataclass(slots=True)
class Cluster:
    """Everything the placement program needs, decided from one snapshot."""

    nodes: dict[str, Node]
    services: dict[str, Service]
    instances: list[Instance]
    revision: int = 0
    existing: Mapping[str, Any] = field(default_factory=dict)  # placement key → document

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> Cluster:
        groups: dict[str, list[tuple[str, Any]]] = {p: [] for p in (SERVICES, PLACEMENTS, INSTANCES)}
        for key, value in snapshot.values.items():  # one pass, not one scan per prefix
            for prefix, group in groups.items():
                if key.startswith(prefix):
                    group.append((key, value))
                    break
        for group in groups.values():
            group.sort(key=lambda item: item[0])
        nodes = _nodes(snapshot)
        services = {s.name: s for s in (_service(doc) for _, doc in groups[SERVICES])}
        existing = dict(groups[PLACEMENTS])
        instances = []
        for key, doc in groups[INSTANCES]:
            tenant = key[len(INSTANCES):].split("/", 1)[0]
            placement = existing.get(f"{PLACEMENTS}{tenant}/{doc['name']}") or {}
            node = placement.get("node")
            if node is not None and (node not in nodes or nodes[node].condition != "ready"):
                node = None  # its node is gone, down or draining: place it again
            resources = doc.get("resources") or {}
            instances.append(Instance(
                tenant, doc["name"], doc["service"], doc.get("ordinal"),
                int(resources.get("cpu") or 0), mib_up(resources.get("memory") or 0), node, key,
            ))
        return cls(nodes, services, instances, snapshot.revision, existing)

    def units(self) -> dict[str, list[str]]:
        """unit → its member services (a solo service is its own unit), sorted."""
        members: dict[str, list[str]] = defaultdict(list)
        for service in sorted(self.services.values(), key=lambda s: s.name):
            members[service.unit].append(service.name)
        return dict(members)

    def used(self) -> dict[str, tuple[int, int]]:
        """node → (cpu, MiB) requested by the instances placed on it."""
        used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for inst in self.instances:
            if inst.node is not None:
                used[inst.node][0] += inst.cpu
                used[inst.node][1] += inst.mem
        return {n: (c, m) for n, (c, m) in used.items()}


def _pairs(labels: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in (labels or {}).items()))


def _nodes(snapshot: Snapshot) -> dict[str, Node]:
    nodes = {}
    for key, observed in snapshot.under(OBSERVED_NODES):
        name = key[len(OBSERVED_NODES):]
        desired = snapshot.get(f"{DESIRED_NODES}{name}") or {}
        capacity = observed.get("capacity") or {}
        labels = {**(observed.get("labels") or {}), **(desired.get("labels") or {})}
        restrictions = set(observed.get("restrictions") or ()) | set(desired.get("restrictions") or ())
        condition = (snapshot.get(f"{NODE_CONDITIONS}{name}") or {}).get("condition", "ready")
        nodes[name] = Node(
            name,
            int(capacity.get("cpu") or 0),
            int(capacity.get("memory") or 0) // MIB,
            desired.get("zone") or observed.get("zone"),
            desired.get("architecture") or observed.get("architecture"),
            _pairs(labels),
            tuple(sorted(restrictions)),
            condition,
        )
    return nodes


def _service(doc: Mapping[str, Any]) -> Service:
    placement = doc.get("placement") or {}
    resources = doc.get("resources") or {}
    return Service(
        name=f"{doc['tenant']}/{doc['name']}",
        cpu=int(resources.get("cpu") or 0),
        mem=mib_up(resources.get("memory") or 0),
        require=tuple(sorted((r["key"], str(r["value"])) for r in placement.get("require") or ())),
        accept=tuple(sorted(placement.get("accept") or ())),
        zone=placement.get("zone"),
        arch=placement.get("architecture"),
        spread=bool(placement.get("zone_spread")),
        prefer=tuple(sorted((p["key"], str(p["value"]), int(p.get("weight") or 1))
                            for p in placement.get("prefer") or ())),
        colocate=tuple(sorted(placement.get("colocate") or ())),
        separate=tuple(sorted(placement.get("separate") or ())),
        group=doc.get("group"),
    )
