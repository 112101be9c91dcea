"""The disruption controller: drains (and rebalancing moves) as steps within each service's budget.

Reads the services, instances, placements, agents' instance reports, node conditions and rollout
documents; writes `derived/disruption/<tenant>/<service>` (surge, removals, moves: read by the
instance and placement controllers), `derived/drain/<node>` (what a draining node waits for) and
`derived/rebalance` (the last rebalancing cycle and when instances last moved). A service group's
members drain seat by seat (group_drain.py), the others service by service (drain.py). Pure: time
is the `now` the runner passes. docs/controllers.md has the rules.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ccattler.engine.autoscale.effective import effective_service
from ccattler.engine.disruption.drain import Member, Step, drain_step, rollout_active
from ccattler.engine.disruption.explain import why_blocked
from ccattler.engine.disruption.group_drain import GroupStep, group_step
from ccattler.engine.disruption.group_moves import blocked_entry, group_units, no_target, roomy_targets
from ccattler.engine.disruption.rebalance import RebalanceOptions, rebalance
from ccattler.engine.facts import derived_instance
from ccattler.engine.facts.keys import (
    DESIRED_NODES,
    DESIRED_SERVICES,
    DISRUPTIONS,
    DRAINS,
    INSTANCES,
    NODE_CONDITIONS,
    OBSERVED_INSTANCES,
    OBSERVED_NODES,
    PLACEMENTS,
    REBALANCE,
    ROLLOUTS,
    SCALE,
    display_name,
)
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot
from ccattler.engine.placement.model import GROUP_PREFIX, Cluster
from ccattler.engine.placement.rebalance import kept_reasons
from ccattler.engine.placement.run import slots_of

DRAINING = frozenset({"draining", "drained"})


@dataclass(slots=True)
class View:
    """The snapshot, grouped once: per service its document and members; per node its condition."""

    services: dict[str, Mapping[str, Any]]
    members: dict[str, list[Member]]
    placements: dict[str, str | None]  # "tenant/instance" → node
    conditions: dict[str, str]
    rollouts: dict[str, Mapping[str, Any]]
    pending: int  # instances without a node


def view(snapshot: Snapshot) -> View:
    services: dict[str, Mapping[str, Any]] = {}
    instances: list[tuple[str, str, Mapping[str, Any]]] = []
    placements: dict[str, str | None] = {}
    observed: dict[str, Mapping[str, Any]] = {}
    conditions: dict[str, str] = {}
    rollouts: dict[str, Mapping[str, Any]] = {}
    scales: dict[str, Mapping[str, Any]] = {}
    for key, doc in snapshot.values.items():
        if not isinstance(doc, Mapping):
            continue
        if key.startswith(INSTANCES):
            full, _, name = key[len(INSTANCES):].rpartition("/")
            instances.append((full, name, doc))
        elif key.startswith(PLACEMENTS):
            placements[key[len(PLACEMENTS):]] = doc.get("node")
        elif key.startswith(OBSERVED_INSTANCES):
            observed[key[len(OBSERVED_INSTANCES):]] = doc
        elif key.startswith(DESIRED_SERVICES):
            services[key[len(DESIRED_SERVICES):]] = doc
        elif key.startswith(NODE_CONDITIONS):
            conditions[key[len(NODE_CONDITIONS):]] = str(doc.get("condition"))
        elif key.startswith(ROLLOUTS):
            rollouts[key[len(ROLLOUTS):]] = doc
        elif key.startswith(SCALE):
            scales[key[len(SCALE):]] = doc
    # Budgets are of the count the instance controller keeps (the autoscaler's, when it set one):
    # a floor from the user's `instances` would let a drain take an autoscaled-up service below
    # its floor, and hold an autoscaled-down one forever.
    services = {full: effective_service(doc, scales.get(full)) for full, doc in services.items()}
    members: dict[str, list[Member]] = defaultdict(list)
    pending = 0
    for full, name, doc in sorted(instances, key=lambda item: (item[0], item[1])):
        tenant = full.split("/", 1)[0]
        node = placements.get(f"{tenant}/{name}")
        pending += node is None
        members[full].append(Member(name, node, is_ready(observed.get(f"{tenant}/{name}"), node),
                                    derived_instance.spec(doc)))
    return View(services, dict(members), placements, conditions, rollouts, pending)


def is_ready(report: Mapping[str, Any] | None, node: str | None) -> bool:
    """Ready: the agent of the node it is placed on reports it running and ready."""
    return (node is not None and isinstance(report, Mapping) and report.get("node") == node
            and report.get("state") == "running" and report.get("ready") is not False)


class DisruptionController:
    """Drains nodes and rebalances load, one budget-sized step at a time."""

    name: ClassVar[str] = "disruption"
    reads: ClassVar[tuple[str, ...]] = (
        DESIRED_SERVICES, INSTANCES, PLACEMENTS, OBSERVED_INSTANCES, OBSERVED_NODES, DESIRED_NODES,
        NODE_CONDITIONS, ROLLOUTS, SCALE,
        DISRUPTIONS, DRAINS, REBALANCE,
    )
    writes: ClassVar[tuple[str, ...]] = (DISRUPTIONS, DRAINS, REBALANCE)

    def __init__(self, options: RebalanceOptions | None = None) -> None:
        self.options = options or RebalanceOptions()
        self.started: float | None = None  # the first `now` seen: the rebalancer's grace period
        self._busy = True  # a drain or a move is under way: agents' reports matter
        self.weighed: float | None = None  # when the rebalancer last weighed the nodes' loads

    def wakes_on(self, key: str, *change: Any) -> bool:
        """Agents' instance reports matter only while a drain or a move waits on readiness (the
        periodic resync covers rebalancing); every other read always wakes it."""
        return self._busy or not key.startswith(OBSERVED_INSTANCES)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        if self.started is None:
            self.started = now
        v = view(snapshot)
        draining = {n for n, c in v.conditions.items() if c in DRAINING}
        steps: dict[str, Step] = {}
        groups, grouped = _group_steps(snapshot, v, draining)
        for unit, gs in groups.items():
            steps.update(_member_steps(unit, gs))
        for full in sorted(v.members):
            service = v.services.get(full)
            if service is None or full in grouped:
                continue  # a group's members drain as seats (group_drain.py)
            tenant, name = full.split("/", 1)
            step = drain_step(display_name(tenant, name), service, v.members[full], draining,
                              v.rollouts.get(full))
            if step.document() is not None or step.waits:
                steps[full] = step
        moves, record, weighed = rebalance(snapshot, v, steps, now, self.started, self.options,
                                           self.weighed)
        if weighed:
            self.weighed = now
        puts: dict[str, Any] = {}
        wanted: dict[str, dict[str, Any]] = {}
        for full, step in steps.items():
            doc = step.document()
            if doc is not None:
                wanted[full] = doc
        for full, targets in moves.items():
            doc = wanted.setdefault(full, {"extra": 0, "remove": [], "move": {}})
            doc["move"] = dict(sorted({**doc["move"], **targets}.items()))
        for full, doc in wanted.items():
            puts[DISRUPTIONS + full] = doc
        for node in sorted(draining):
            puts[DRAINS + node] = _drain_document(node, steps, v, groups)
        if record is not None:
            puts[REBALANCE] = record
        deletes = {k for k, _ in snapshot.under(DISRUPTIONS) if k[len(DISRUPTIONS):] not in wanted}
        deletes |= {k for k, _ in snapshot.under(DRAINS) if k[len(DRAINS):] not in draining}
        self._busy = bool(wanted) or bool(draining)
        together = tuple(  # the members of a group move: their documents commit as one
            frozenset(DISRUPTIONS + m["service"] for m in move["members"])
            for move in (record or {}).get("moves") or () if "members" in move
            if all(DISRUPTIONS + m["service"] in puts for m in move["members"]))
        together += tuple(  # so do those of a group's drain: a seat surges and goes as one
            frozenset(DISRUPTIONS + full for full in gs.docs) for gs in groups.values() if len(gs.docs) > 1)
        return ChangeSet(puts, frozenset(deletes), together)


def _group_steps(snapshot: Snapshot, v: View, draining: set[str]) -> tuple[dict[str, GroupStep], set[str]]:
    """(group unit → its drain step, the member services drained as seats). The cluster model is
    built only when a member of some group has an instance on a draining node."""
    if not any(m.node in draining for full, service in v.services.items() if service.get("group")
               for m in v.members.get(full, ())):
        return {}, set()
    cluster = Cluster.from_snapshot(snapshot)
    units = group_units(cluster)
    out: dict[str, GroupStep] = {}
    for unit, slots in sorted(slots_of(cluster, units).items()):
        step = group_step(units[unit], slots, v, draining, lambda unit=unit: _room(cluster, unit))
        if step is not None:
            out[unit] = step
    return out, {full for names in units.values() for full in names}


def _room(cluster: Cluster, unit: str) -> dict[str, Any] | None:
    """None when a schedulable node has room for one more seat of `unit` (its members' summed
    requests, every hard constraint: rules/placement.lp part `why`), else the reason `no_target`."""
    rejects = kept_reasons(cluster, unit)
    ready = [n for n, node in sorted(cluster.nodes.items()) if node.condition == "ready"]
    if roomy_targets(rejects, ready):
        return None
    return no_target(rejects, sorted(cluster.nodes))


def _member_steps(unit: str, gs: GroupStep) -> dict[str, Step]:
    """A group's step as one `Step` per member: its document, and the group's waits worded."""
    label = unit[len(GROUP_PREFIX):]
    waits = {node: f"group {label}: {why_blocked(reason)}" for node, reason in gs.waits.items()}
    out = {}
    for full in gs.names:
        doc = gs.docs.get(full) or {}
        out[full] = Step(doc.get("extra", 0), tuple(doc.get("remove") or ()), doc.get("move") or {}, waits,
                         tuple(name for f, name in gs.moving if f == full))
    return out


def _drain_document(node: str, steps: Mapping[str, Step], v: View,
                    groups: Mapping[str, GroupStep] | None = None) -> dict[str, Any]:
    waits = sorted({step.waits[node] for step in steps.values() if node in step.waits})
    left = sum(1 for members in v.members.values() for m in members if m.node == node)
    moving = sorted(display_name(full.split("/", 1)[0], name) for full, step in steps.items()
                    for name in step.moving if any(m.name == name and m.node == node
                                                   for m in v.members[full]))
    doc: dict[str, Any] = {"node": node, "instances": left, "waits": waits, "moving": moving}
    blocked = [blocked_entry(unit, gs.names, node, gs.waits[node])
               for unit, gs in sorted((groups or {}).items()) if node in gs.waits]
    if blocked:
        doc["blocked"] = blocked  # why a group's seat waits there, as reason codes (group_drain.py)
    return doc


__all__ = ["DisruptionController", "View", "is_ready", "rollout_active", "view"]
