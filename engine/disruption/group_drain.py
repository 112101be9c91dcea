"""What a drain does to a service group this tick: its seats leave a draining node as one unit.

A seat is replica i of every member of a group, on one node (the placement program's own pairing,
`engine/placement/run.slots_of`); members that share a network namespace start and stop together
on the agent, so a drain never takes a seat apart. For a group of stateless members the drain
surges whole seats: every member gets the same `extra` (the least of the members' `max_extra`),
so one new instance of every member is created in one change, and the placement program places
them as one replica of the group's unit — on one schedulable node that fits the members' summed
requests and every member's hard constraints. An old seat on the draining node is removed as a
whole (each member's instance in it named in that member's `remove`), only when every member's
budget allows: each ready instance in the seat takes one from its member's allowance, so the
group's budget is the least of its members' (engine/disruption/group_moves.py, as rebalancing
does). A member mid-rollout, or without a service document, holds the whole group. A group with a
stateful member re-places one seat at a time instead (`move`, every member to anywhere; placement
places the seat again as a unit), within the same budget, once a schedulable node has room for it.

When a seat cannot leave yet the drain says why with the rebalancer's reason codes (worded by
engine/disruption/explain.py): `member_rollout`, `member_missing`, `member_budget` (a member at its
floor: the surge is not ready yet, or the budget allows nothing), `no_target` (no schedulable
node has room for all its members together: rules/placement.lp part `why`), `split` (an
instance on the node whose seat is not whole there; it is removed once it is not ready).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ccattler.engine.disruption.group_moves import allowances, group_hold, member_budget
from ccattler.engine.facts import service_doc
from ccattler.engine.placement.run import Slot

if TYPE_CHECKING:
    from ccattler.engine.disruption.controller import View

#: Why no seat could be placed now, or None when a schedulable node has room for one more seat.
Room = Callable[[], dict[str, Any] | None]


@dataclass(slots=True)
class GroupStep:
    """The drain's decision for one group: per member its `{extra, remove, move}` inputs, per
    draining node the reason a seat still waits there, and the instances leaving now."""

    names: tuple[str, ...] = ()  # the members (full service names)
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)  # full service → document
    waits: dict[str, dict[str, Any]] = field(default_factory=dict)  # node → {"code", "args"}
    moving: list[tuple[str, str]] = field(default_factory=list)  # (full service, instance)


def group_step(names: Sequence[str], slots: Sequence[Slot], v: View, draining: set[str],
               room: Room) -> GroupStep | None:
    """The next step of draining `draining` nodes for the group with members `names` and its
    seats `slots`; None when none of its instances is on a draining node."""
    drained = [s for s in slots if any(i.node in draining for i in s.instances)]
    if not drained:
        return None
    nodes = sorted({str(i.node) for s in drained for i in s.instances if i.node in draining})
    hold = group_hold(names, v)
    if hold is not None:
        return GroupStep(tuple(names), waits=dict.fromkeys(nodes, hold))
    ready = {(full, m.name): m.ready for full in names for m in v.members.get(full, ())}
    allowed = allowances(names, v)
    step = GroupStep(tuple(names))
    remove: dict[str, list[str]] = {full: [] for full in names}
    seats = sorted((s for s in drained if s.node is not None),
                   key=lambda s: (sum(ready.get((i.service, i.name), False) for i in s.instances),
                                  [i.name for i in s.instances]))
    for slot in (s for s in drained if s.node is None):  # not whole on one node: not a running seat
        for inst in slot.instances:
            if inst.node not in draining:
                continue
            if ready.get((inst.service, inst.name), False):
                step.waits.setdefault(str(inst.node), {
                    "code": "split", "args": {"instances": [f"{i.tenant}/{i.name}" for i in slot.instances]}})
            else:
                remove[inst.service].append(inst.name)
    stateful = any(v.services[full].get("stateful") for full in names)
    left: list[tuple[Slot, dict[str, Any]]] = []
    for seat in seats:
        cost = Counter(i.service for i in seat.instances if ready.get((i.service, i.name), False))
        short = next((full for full in names if allowed[full] < cost[full]), None)
        if short is not None or (stateful and step.moving):
            left.append((seat, member_budget(short, v) if short is not None else
                         {"code": "one_seat_at_a_time", "args": {}}))
            continue
        for full in names:
            allowed[full] -= cost[full]
        for inst in seat.instances:
            remove[inst.service].append(inst.name)
            step.moving.append((inst.service, inst.name))
    if stateful:
        if step.moving and (blocked := room()) is not None:  # the seat would stay where it is
            moving = set(step.moving)
            for full in names:
                remove[full] = [n for n in remove[full] if (full, n) not in moving]
            left.insert(0, (next(s for s in seats if (s.instances[0].service, s.instances[0].name) in moving),
                            blocked))
            step.moving.clear()
        moves = {full: {name: None for name in remove[full]} for full in names}
        for full in names:
            if moves[full]:
                step.docs[full] = {"extra": 0, "remove": [], "move": dict(sorted(moves[full].items()))}
        for seat, reason in left:
            step.waits.setdefault(str(seat.node), reason)
        return step
    extra = _extra(names, slots, v, len(left), room, left)
    for seat, reason in left:
        step.waits.setdefault(str(seat.node), reason)
    for full in names:
        if extra or remove[full]:
            step.docs[full] = {"extra": extra, "remove": sorted(remove[full]), "move": {}}
    return step


def _extra(names: Sequence[str], slots: Sequence[Slot], v: View, waiting: int, room: Room,
           left: list[tuple[Slot, dict[str, Any]]]) -> int:
    """Surge seats for the `waiting` ones (every member the same count), and why those wait."""
    if not waiting:
        return 0
    want = min(waiting, min(_max_extra(v.services[full]) for full in names))
    # Surge seats already asked for: instances of every member beyond its count.
    surged = max(0, min(len(v.members.get(full, ())) - _count(v.services[full]) for full in names))
    unplaced = any(all(i.node is None for i in s.instances) for s in slots)
    blocked = None
    if want > surged or unplaced:
        blocked = room()  # a new seat fits nowhere: add none (placement would leave it pending)
        if blocked is not None:
            want = min(want, surged)
    if blocked is not None and (unplaced or surged == 0):  # no surge seat to wait for: it waits for room
        left[:] = [(seat, blocked) for seat, _ in left]
    return want


def _max_extra(service: Mapping[str, Any]) -> int:
    value = service_doc.update(service).get("max_extra", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _count(service: Mapping[str, Any]) -> int:
    value = service.get("instances", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
