"""The failure controller: a node's condition (`derived/node/<n>`) from its lease-bound presence.

`observed/node/<n>` is put with the node's lease, so it vanishes when the agent stops heartbeating.
A node with observed facts is `ready`; one without them that still matters (instances placed on
it, or declared by a `node` block) is `down`, which makes the placement controller re-place its
instances elsewhere; a node that is gone and no longer matters is forgotten. `since` is the
snapshot revision at which the condition last changed. docs/controllers.md describes how a
returning node reconciles.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ccattler.engine.facts.snapshot import ChangeSet, Snapshot

OBSERVED_NODES = "observed/node/"
DECLARED_NODES = "desired/node/"
PLACEMENTS = "derived/placement/"
CONDITIONS = "derived/node/"


def _names(snapshot: Snapshot, prefix: str) -> set[str]:
    return {key[len(prefix):] for key, _ in snapshot.under(prefix)}


def placed_nodes(snapshot: Snapshot) -> set[str]:
    """Nodes that at least one placement names."""
    return {str(doc.get("node")) for _, doc in snapshot.under(PLACEMENTS) if doc.get("node")}


class FailureController:
    """Marks nodes `ready` or `down` from their observed facts."""

    name: ClassVar[str] = "failure"
    reads: ClassVar[tuple[str, ...]] = (OBSERVED_NODES, DECLARED_NODES, PLACEMENTS, CONDITIONS)
    writes: ClassVar[tuple[str, ...]] = (CONDITIONS,)

    def depends_on(self, key: str) -> tuple[str, ...]:
        """A condition follows the node's observed facts: guard on them."""
        return (OBSERVED_NODES + key[len(CONDITIONS):],)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        alive = _names(snapshot, OBSERVED_NODES)
        relevant = alive | _names(snapshot, DECLARED_NODES) | placed_nodes(snapshot)
        current = {key[len(CONDITIONS):]: doc for key, doc in snapshot.under(CONDITIONS)}
        puts: dict[str, Any] = {}
        for node in sorted(relevant):
            condition = "ready" if node in alive else "down"
            doc = current.get(node)
            if doc is None or doc.get("condition") != condition:
                puts[CONDITIONS + node] = {"condition": condition, "since": snapshot.revision}
        deletes = frozenset(CONDITIONS + node for node in current if node not in relevant)
        return ChangeSet(puts, deletes)
