"""The placement view of a snapshot: nodes, services, units, what is placed and what is pending.

`Cluster.from_snapshot(snapshot)` reads `observed/node` merged with `desired/node` (the desired
labels, restrictions and zone win), `derived/node` conditions, `desired/service`,
`derived/instance` and `derived/placement`. Quantities become millicores and MiB (requests
rounded up, capacities down) because clingo integers are 32-bit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ccattler.engine.facts import derived_instance, service_doc
from ccattler.engine.facts.keys import (
    DESIRED_NODES,
    DESIRED_SERVICES,
    INSTANCES,
    NODE_CONDITIONS,
    OBSERVED_NODES,
    PLACEMENTS,
)
from ccattler.engine.facts.snapshot import Snapshot

MIB = 1024 * 1024
#: Quantities (millicores, MiB) stay far inside clingo's 32 bits: the program multiplies them by
#: replica counts and percentages. 2**24 is 16,777 cores or 16 TiB.
INT_LIMIT = 2**24
GROUP_PREFIX = "group:"
#: Conditions whose node keeps the instances placed on it: a draining or disabled node takes no
#: new ones (`node_unready`), its own leave only through the disruption controller's budgets.
KEEPS_INSTANCES = frozenset({"ready", "draining", "drained", "disabled"})


def mib_up(nbytes: int) -> int:
    return -(-int(nbytes) // MIB)


@dataclass(frozen=True, slots=True)
class Node:
    """A node as placement sees it; `condition` is ready, down, draining, drained or disabled (only
    ready nodes take new instances)."""

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
    skipped: tuple[str, ...] = ()  # keys of malformed documents left out

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, cache: DocumentCache | None = None) -> Cluster:
        """Read the snapshot in one pass; a malformed document is skipped (listed in `skipped`)
        rather than failing the placement of everything else. With a `cache`, services and
        instances whose document object is unchanged since the last call are not parsed again."""
        cache = cache if cache is not None else DocumentCache()
        prefixes = (DESIRED_SERVICES, PLACEMENTS, INSTANCES, OBSERVED_NODES, DESIRED_NODES, NODE_CONDITIONS)
        groups: dict[str, list[tuple[str, Any]]] = {p: [] for p in prefixes}
        for key, value in snapshot.values.items():  # one pass; every prefix is two segments
            group = groups.get(key[: key.find("/", key.find("/") + 1) + 1])
            if group is not None:
                group.append((key, value))
        for group in groups.values():
            group.sort(key=lambda item: item[0])
        skipped: list[str] = []
        nodes = _nodes(groups, skipped)
        services = {}
        for key, doc in groups[DESIRED_SERVICES]:
            service = cache.parse(_service, key, doc, skipped)
            if service is not None:
                services[service.name] = service
        existing = dict(groups[PLACEMENTS])
        instances = []
        for key, doc in groups[INSTANCES]:
            inst = cache.parse(_instance, key, doc, skipped)
            if inst is None:
                continue
            placement = existing.get(f"{PLACEMENTS}{inst.tenant}/{inst.name}")
            node = placement.get("node") if isinstance(placement, Mapping) else None
            if node is not None and node in nodes and nodes[node].condition in KEEPS_INSTANCES:
                inst = Instance(inst.tenant, inst.name, inst.service, inst.ordinal, inst.cpu, inst.mem,
                                node, key)
            # otherwise: not placed, or its node is gone or down: place it again
            instances.append(inst)
        cache.keep_only(key for group in (groups[DESIRED_SERVICES], groups[INSTANCES]) for key, _ in group)
        return cls(nodes, services, instances, snapshot.revision, existing, tuple(skipped))

    def units(self) -> dict[str, list[str]]:
        """unit → its member services (a solo service is its own unit), sorted."""
        members: dict[str, list[str]] = defaultdict(list)
        for service in sorted(self.services.values(), key=lambda s: s.name):
            members[service.unit].append(service.name)
        return dict(members)


def _pairs(labels: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in (labels or {}).items()))


class DocumentCache:
    """Parsed documents by key, reused while the document object is the same one (the runner's
    watch-fed snapshots share unchanged documents between ticks); malformed ones are remembered
    as such."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Any, Any]] = {}

    def parse(self, parse: Any, key: str, doc: Any, skipped: list[str]) -> Any:
        hit = self._entries.get(key)
        if hit is not None and hit[0] is doc:
            value = hit[1]
        else:
            value = _guard(parse, key, doc, [])
            self._entries[key] = (doc, value)
        if value is None:
            skipped.append(key)
        return value

    def keep_only(self, keys: Iterable[str]) -> None:
        live = set(keys)
        for key in [k for k in self._entries if k not in live]:
            del self._entries[key]


def _guard(parse: Any, key: str, doc: Any, skipped: list[str], *args: Any) -> Any:
    try:
        return parse(key, doc, *args)
    except (KeyError, TypeError, ValueError, AttributeError):
        skipped.append(key)
        return None


def _fits(value: int) -> int:
    """Quantities enter clingo as 32-bit integers: refuse what does not fit (the doc is skipped)."""
    if not 0 <= value <= INT_LIMIT:
        raise ValueError(f"{value} out of range")
    return value


def _nodes(groups: Mapping[str, list[tuple[str, Any]]], skipped: list[str]) -> dict[str, Node]:
    desired = {k[len(DESIRED_NODES):]: d for k, d in groups[DESIRED_NODES]}
    conditions = {k[len(NODE_CONDITIONS):]: d for k, d in groups[NODE_CONDITIONS]}
    nodes = {}
    for key, observed in groups[OBSERVED_NODES]:
        name = key[len(OBSERVED_NODES):]
        node = _guard(_node, key, observed, skipped, desired.get(name) or {}, conditions.get(name) or {})
        if node is not None:
            nodes[name] = node
    return nodes


def _node(key: str, observed: Mapping[str, Any], desired: Mapping[str, Any],
          condition: Mapping[str, Any]) -> Node:
    capacity = observed.get("capacity") or {}
    labels = {**(observed.get("labels") or {}), **(desired.get("labels") or {})}
    restrictions = set(observed.get("restrictions") or ()) | set(desired.get("restrictions") or ())
    return Node(
        key[len(OBSERVED_NODES):],
        _fits(int(capacity.get("cpu") or 0)),
        _fits(int(capacity.get("memory") or 0) // MIB),
        desired.get("zone") or observed.get("zone"),
        desired.get("architecture") or observed.get("architecture"),
        _pairs(labels),
        tuple(sorted(str(r) for r in restrictions)),
        condition.get("condition", "ready"),
    )


def _instance(key: str, doc: Mapping[str, Any]) -> Instance:
    """The instance as its document says (not yet placed: the caller looks up its placement)."""
    tenant = key[len(INSTANCES):].split("/", 1)[0]
    resources = derived_instance.resources(doc)
    return Instance(
        tenant, str(doc["name"]), str(doc["service"]), derived_instance.ordinal(doc),
        _fits(int(resources.get("cpu") or 0)), _fits(mib_up(resources.get("memory") or 0)), None, key,
    )


def _service(key: str, doc: Mapping[str, Any]) -> Service:
    placement = service_doc.placement(doc)
    resources = service_doc.resources(doc)
    return Service(
        name=f"{doc['tenant']}/{doc['name']}",
        cpu=_fits(int(resources.get("cpu") or 0)),
        mem=_fits(mib_up(resources.get("memory") or 0)),
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
