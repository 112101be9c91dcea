"""The failure controller: a node's condition (`derived/node/<n>`) from its lease-bound presence.

`observed/node/<n>` is put with the node's lease, so it vanishes when the agent stops heartbeating.
A node with observed facts is `ready`; one without them that still matters (instances placed on
it, or declared by a `node` block) is `down`, which makes the placement controller re-place its
instances elsewhere; a node that is gone and no longer matters is forgotten. A live node with a
user's intent (`intent/node/<n>`, written by `cca drain` / `cca disable-node`) is `draining` while
instances are still placed on it, then `drained`, or `disabled`: unschedulable, its instances stay
(the disruption controller moves a drained node's instances within their budgets). `since` is the
snapshot revision at which the condition last changed. docs/controllers.md describes how a
returning node reconciles.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ccattler.engine.facts.keys import DESIRED_NODES, NODE_CONDITIONS, NODE_INTENT, OBSERVED_NODES, PLACEMENTS
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot

#: The conditions of a live node that takes no new instances (its own stay placed).
UNSCHEDULABLE = frozenset({"draining", "drained", "disabled"})


def _names(snapshot: Snapshot, prefix: str) -> set[str]:
    return {key[len(prefix):] for key, _ in snapshot.under(prefix)}


def placed_nodes(snapshot: Snapshot) -> set[str]:
    """Nodes that at least one placement names."""
    return {str(doc.get("node")) for _, doc in snapshot.under(PLACEMENTS) if doc.get("node")}


def live_condition(intent: object, holds_instances: bool) -> str:
    """The condition of a node whose agent heartbeats, given the user's intent document."""
    wanted = intent.get("intent") if isinstance(intent, dict) else None
    if wanted == "drain":
        return "draining" if holds_instances else "drained"
    if wanted == "disable":
        return "disabled"
    return "ready"


class FailureController:
    """Marks nodes `ready`, `down`, `draining`, `drained` or `disabled`."""

    name: ClassVar[str] = "failure"
    timeless: ClassVar[bool] = True  # its changes follow the snapshot alone (not `now`)
    reads: ClassVar[tuple[str, ...]] = (
        OBSERVED_NODES, DESIRED_NODES, PLACEMENTS, NODE_CONDITIONS, NODE_INTENT,
    )
    writes: ClassVar[tuple[str, ...]] = (NODE_CONDITIONS,)

    def depends_on(self, key: str) -> tuple[str, ...]:
        """A condition follows the node's observed facts and the user's intent: guard on them."""
        node = key[len(NODE_CONDITIONS):]
        return (OBSERVED_NODES + node, NODE_INTENT + node)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        alive = _names(snapshot, OBSERVED_NODES)
        holding = placed_nodes(snapshot)
        relevant = alive | _names(snapshot, DESIRED_NODES) | holding
        current = {key[len(NODE_CONDITIONS):]: doc for key, doc in snapshot.under(NODE_CONDITIONS)}
        puts: dict[str, Any] = {}
        for node in sorted(relevant):
            condition = (live_condition(snapshot.get(NODE_INTENT + node), node in holding)
                         if node in alive else "down")
            doc = current.get(node)
            if doc is None or doc.get("condition") != condition:
                puts[NODE_CONDITIONS + node] = {"condition": condition, "since": snapshot.revision}
        deletes = frozenset(NODE_CONDITIONS + node for node in current if node not in relevant)
        return ChangeSet(puts, deletes)
