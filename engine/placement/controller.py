"""The placement controller: pending instances → `derived/placement/<tenant>/<instance>`.

It runs rules/placement.lp (through `ccattler.engine.placement`) over the snapshot:
placed instances stay where they are unless their node is gone or down; every other
instance gets a node, or a document with `"node": null` and the aggregated reasons. Documents
are rewritten only when the decision changes, so a second reconcile changes nothing. The knob is
`PlanOptions` (solver budget, candidate pruning, operator extension directories).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

from ccattler.engine.facts import placement_key
from ccattler.engine.facts.keys import (
    DESIRED_NODES,
    DESIRED_SERVICES,
    DISRUPTIONS,
    INSTANCES,
    NODE_CONDITIONS,
    OBSERVED_NODES,
    PLACEMENTS,
)
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot
from ccattler.engine.placement.model import Cluster, DocumentCache
from ccattler.engine.placement.moves import Applied, apply_moves, requested
from ccattler.engine.placement.reasons import summarize
from ccattler.engine.placement.run import Plan, PlanOptions, plan


class PlacementController:
    """Decides a node for every instance that has none (or lost its node)."""

    name: ClassVar[str] = "placement"
    timeless: ClassVar[bool] = True  # its changes follow the snapshot alone (not `now`)
    reads: ClassVar[tuple[str, ...]] = (
        OBSERVED_NODES, DESIRED_NODES, NODE_CONDITIONS, DESIRED_SERVICES, INSTANCES, PLACEMENTS, DISRUPTIONS,
    )
    writes: ClassVar[tuple[str, ...]] = (PLACEMENTS,)

    def __init__(self, options: PlanOptions | None = None) -> None:
        self.options = options or PlanOptions()
        self.last_plan: Plan | None = None
        self._documents = DocumentCache()

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        with _gc_paused():
            cluster = Cluster.from_snapshot(snapshot, self._documents)
            applied = apply_moves(cluster, requested(snapshot))  # the disruption controller's
            result = plan(cluster, self.options)
            self.last_plan = result
            return changes(cluster, result, applied)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """A reconcile allocates tens of thousands of short-lived, acyclic objects beside a large
    snapshot; the cycle collector rescanning that snapshot cost a quarter of a tick (measured)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def changes(cluster: Cluster, result: Plan, applied: Applied | None = None) -> ChangeSet:
    """The puts and deletes that record `result` and the moves applied (only what differs from
    the snapshot)."""
    puts: dict[str, Any] = {}
    applied = applied or Applied()
    by_key = {inst.key: inst for inst in cluster.instances}
    for inst_key, (source, target) in sorted(applied.moved.items()):
        inst = by_key[inst_key]
        puts[placement_key(inst.tenant, inst.name)] = {
            "service": inst.service, "instance": inst.name, "node": target, "revision": cluster.revision,
            "score": None, "reasons": [], "moved_from": source}
    for inst_key, node in sorted(result.placements.items()):
        inst = by_key[inst_key]
        unit = cluster.services[inst.service].unit
        doc = {"service": inst.service, "instance": inst.name, "node": node,
               "revision": cluster.revision, "score": result.scores.get((unit, node), 0), "reasons": []}
        puts[placement_key(inst.tenant, inst.name)] = doc
    for unit, instances in sorted(result.unplaced.items()):
        reasons = summarize(result.reasons.get(unit, ()))
        for inst in instances:
            if inst.key in applied.replace:
                continue  # asked to move, but nothing has room: it stays where it is
            key = placement_key(inst.tenant, inst.name)
            old = cluster.existing.get(key)
            if _same_unplaced(old, reasons):
                continue
            puts[key] = {"service": inst.service, "instance": inst.name, "node": None,
                         "revision": cluster.revision, "score": None, "reasons": reasons}
    live = {placement_key(i.tenant, i.name) for i in cluster.instances}
    deletes = frozenset(k for k in cluster.existing if k not in live)
    together = tuple(frozenset(placement_key(by_key[k].tenant, by_key[k].name) for k in seat)
                     for seat in applied.together)  # a group's seats change node in one commit
    return ChangeSet(puts=puts, deletes=deletes, groups=together)


def _same_unplaced(old: Mapping[str, Any] | None, reasons: list[dict[str, Any]]) -> bool:
    return bool(old) and old.get("node") is None and old.get("reasons") == reasons
