"""What a drain does to one service this tick: surge instances, instances to remove or move, and
what it waits for — pure arithmetic over the service's instances, drawn from `budget`.

Stateless services are drained replacement first: `extra` new instances (the update's
`max_extra`, default 1) start on schedulable nodes, and a drained instance is removed only while
the ready instances stay at or above the floor (an unready one costs nothing), so a one-instance
service with `min_available 1` moves once its replacement is ready. Stateful instances keep their
names: one at a time, within the budget, is re-placed (`move` to any node the placement program
finds; it stays where it is when none has room). A service in the middle of a rollout is not
touched: the drain waits until the rollout has finished, so the two never spend one budget twice.
The members of a service group are not drained here, one service at a time: their seats leave a
draining node as one unit (group_drain.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccattler.engine.disruption import budget
from ccattler.engine.facts import service_doc

#: The rollout document's states that mean "nothing is being rolled out any more": the rollout
#: controller's settled states (engine/rollout/controller.py `SETTLED`; a `failed` rollout steps no
#: more, so a drain does not wait for it).
ROLLOUT_DONE = frozenset({"complete", "rolled back", "failed"})


@dataclass(frozen=True, slots=True)
class Member:
    """One instance of the service as the drain sees it."""

    name: str
    node: str | None
    ready: bool
    spec: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """The drain's decision for one service: the instance controller's and placement's inputs, and
    per drained node the reason it still waits (None: nothing left there, or it is moving)."""

    extra: int = 0
    remove: tuple[str, ...] = ()
    move: Mapping[str, str | None] = field(default_factory=dict)
    waits: Mapping[str, str] = field(default_factory=dict)  # node → reason
    moving: tuple[str, ...] = ()  # instances leaving a drained node now

    def document(self) -> dict[str, Any] | None:
        if not (self.extra or self.remove or self.move):
            return None
        return {"extra": self.extra, "remove": sorted(self.remove), "move": dict(sorted(self.move.items()))}


def rollout_active(rollout: Mapping[str, Any] | None, members: Sequence[Member]) -> bool:
    """A rollout is in progress: instances of more than one spec, or a rollout document that is
    neither finished (its state) nor settled (counts of one spec only)."""
    if len({m.spec for m in members if m.spec is not None}) > 1:
        return True
    if not isinstance(rollout, Mapping):
        return False
    state = rollout.get("state") or rollout.get("phase") or rollout.get("status")
    if isinstance(state, str):
        return state.lower() not in ROLLOUT_DONE
    counts = rollout.get("counts") or {}
    return sum(1 for n in counts.values() if isinstance(n, int) and n > 0) > 1


def drain_step(name: str, service: Mapping[str, Any], members: Sequence[Member],
               draining: set[str], rollout: Mapping[str, Any] | None = None) -> Step:
    """The next step of draining `draining` nodes for the service `name` (its display name)."""
    drained = sorted((m for m in members if m.node in draining), key=lambda m: (m.ready, m.name))
    if not drained:
        return Step()
    nodes = sorted({str(m.node) for m in drained})
    if rollout_active(rollout, members):
        return Step(waits=dict.fromkeys(nodes, f"{name} rollout in progress"))
    ready = sum(m.ready for m in members)
    allowed = budget.disruptions_allowed(service, ready)
    floor = budget.floor(service)
    if service.get("stateful"):
        return _stateful(name, drained, allowed, floor)
    remove: list[str] = []
    for member in drained:  # unready first: removing them costs nothing
        if not member.ready:
            remove.append(member.name)
        elif allowed > 0:
            remove.append(member.name)
            allowed -= 1
    left = [m for m in drained if m.name not in remove]
    max_extra = service_doc.update(service).get("max_extra", 1)
    extra = min(len(left), max_extra if isinstance(max_extra, int) and max_extra > 0 else 1)
    waits = {}
    for node in sorted({str(m.node) for m in left}):
        waits[node] = f"{name} floor {floor}"
    return Step(extra, tuple(remove), {}, waits, tuple(remove))


def _stateful(name: str, drained: list[Member], allowed: int, floor: int) -> Step:
    """One ordinal at a time, within the budget; the rest wait."""
    first = drained[0]
    if first.ready and allowed <= 0:
        return Step(waits={str(m.node): f"{name} floor {floor}" for m in drained})
    waits = {str(m.node): f"{name} one ordinal at a time" for m in drained[1:]}
    return Step(move={first.name: None}, waits=waits, moving=(first.name,))
