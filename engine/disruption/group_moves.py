"""Rebalancing of service groups: which seats of a group may move off the loaded node, and why a
group cannot move — pure over the snapshot's cluster and the disruption controller's view.

A seat is replica i of every member of a group, placed on one node (the placement program's own
pairing, `engine/placement/run.slots_of`). Members that share a network namespace start and stop
together on the agent (agent/sandboxes.py), so a seat moves whole or not at all: the placement
program places it as one replica of the group's unit with the members' summed requests, and the
placement controller applies the move of all its members in one change or none
(engine/placement/moves.py). A seat on the source node may move when every member's instance in
it is ready and none moved within the cooldown; the group's budget is the least of its members'
(each seat moved takes one instance of every member); a member mid-rollout holds the group.

Why a group cannot move is data, `{"code", "args"}`, worded by engine/disruption/explain.py:

  member_budget    {member, floor, ready}  the member is at its disruption floor
  member_rollout   {member}                the member is being rolled out
  member_missing   {member}                the member's service document is gone
  member_not_ready {instance}              an instance of the seat is not ready
  moved_recently   {instance}              an instance of the seat moved within the cooldown
  split            {instances}             the seat's members are not all on the node
  no_target        {rejects: [{node, code, args}]}  no target node takes the whole seat
                                           (rules/placement.lp part why: capacity, labels, …)
  not_worth_it     {targets}               targets have room; the re-solve kept the seat (the
                                           combined gain does not outweigh restarting every
                                           member, or the cap of moves went to better ones)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ccattler.engine.disruption import budget
from ccattler.engine.disruption.drain import rollout_active
from ccattler.engine.placement.model import GROUP_PREFIX, Cluster
from ccattler.engine.placement.run import Slot, slots_of
from ccattler.engine.solve.decode import Reject

if TYPE_CHECKING:
    from ccattler.engine.disruption.controller import View

#: One seat as the rebalancer records it: (full service name, instance name) per member.
Seat = tuple[tuple[str, str], ...]
#: Reject codes of part `why` that mean "the node has room for the seat".
HAS_ROOM = frozenset({"not_chosen", "prefers_label", "separate_from", "colocate_with"})


@dataclass(slots=True)
class GroupCandidates:
    """Per group unit with seats on the source: the seats that may move and the group's budget,
    or why it cannot move."""

    seats: dict[str, list[Seat]] = field(default_factory=dict)
    budgets: dict[str, int] = field(default_factory=dict)
    blocked: dict[str, dict[str, Any]] = field(default_factory=dict)


def group_candidates(cluster: Cluster, v: View, source: str, recent: Mapping[str, float]) -> GroupCandidates:
    units = group_units(cluster)
    out = GroupCandidates()
    if not units:
        return out
    ready = {(full, m.name): m.ready for full, members in v.members.items() for m in members}
    for unit, slots in sorted(slots_of(cluster, units).items()):
        here = [s for s in slots if any(i.node == source for i in s.instances)]
        if not here:
            continue
        names = units[unit]
        reason = _group_reason(names, v)
        if reason is not None:
            out.blocked[unit] = reason
            continue
        seats, first = [], None
        for slot in here:
            why = _seat_reason(slot, names, source, ready, recent)
            if why is None:
                seats.append(tuple((i.service, i.name) for i in slot.instances))
            elif first is None:
                first = why
        if seats:
            out.seats[unit] = seats
            out.budgets[unit] = group_budget(names, v)
        elif first is not None:
            out.blocked[unit] = first
    return out


def _ready(v: View, full: str) -> int:
    return sum(m.ready for m in v.members.get(full, ()))


def group_units(cluster: Cluster) -> dict[str, list[str]]:
    """Group unit → its member services (full names, sorted)."""
    return {u: names for u, names in cluster.units().items() if u.startswith(GROUP_PREFIX)}


def allowances(names: Sequence[str], v: View) -> dict[str, int]:
    """Member → how many of its ready instances may go now (its own budget, budget.py)."""
    return {full: budget.disruptions_allowed(v.services[full], _ready(v, full)) for full in names}


def group_budget(names: Sequence[str], v: View) -> int:
    """Seats that may go now: every seat takes one instance of every member, so the least of the
    members' allowances."""
    return min(allowances(names, v).values(), default=0)


def group_hold(names: Sequence[str], v: View) -> dict[str, Any] | None:
    """Why nothing of the group may be disrupted at all: a member without a service document, or
    a member mid-rollout (it holds the whole group: two disruptions never spend one budget)."""
    for full in names:
        if full not in v.services:
            return {"code": "member_missing", "args": {"member": full}}
        if rollout_active(v.rollouts.get(full), v.members.get(full, ())):
            return {"code": "member_rollout", "args": {"member": full}}
    return None


def member_budget(full: str, v: View) -> dict[str, Any]:
    """The reason `member_budget` of one member."""
    return {"code": "member_budget",
            "args": {"member": full, "floor": budget.floor(v.services[full]), "ready": _ready(v, full)}}


def _group_reason(names: Sequence[str], v: View) -> dict[str, Any] | None:
    """Why no seat of the group may move, whatever the seat: a member's rollout or budget."""
    hold = group_hold(names, v)
    if hold is not None:
        return hold
    allowed = allowances(names, v)
    short = next((full for full in names if allowed[full] <= 0), None)
    return None if short is None else member_budget(short, v)


def _seat_reason(slot: Slot, names: Sequence[str], source: str, ready: Mapping[tuple[str, str], bool],
                 recent: Mapping[str, float]) -> dict[str, Any] | None:
    instances = [f"{i.tenant}/{i.name}" for i in slot.instances]
    if slot.node != source or len(slot.instances) != len(names):
        return {"code": "split", "args": {"instances": instances}}
    for inst, shown in zip(slot.instances, instances, strict=True):
        if not ready.get((inst.service, inst.name), False):
            return {"code": "member_not_ready", "args": {"instance": shown}}
        if shown in recent:
            return {"code": "moved_recently", "args": {"instance": shown}}
    return None


def kept_reason(rejects: Sequence[Reject], targets: Sequence[str]) -> dict[str, Any]:
    """Why the re-solve kept a movable seat, from part `why`'s per-node reasons on the targets."""
    roomy = roomy_targets(rejects, targets)
    if roomy:
        return {"code": "not_worth_it", "args": {"targets": roomy}}
    return no_target(rejects, targets)


def roomy_targets(rejects: Sequence[Reject], targets: Sequence[str]) -> list[str]:
    """The targets where part `why` finds room for one more seat (hard constraints hold there)."""
    return sorted({str(r.target) for r in rejects if str(r.target) in targets and str(r.code) in HAS_ROOM})


def no_target(rejects: Sequence[Reject], targets: Sequence[str]) -> dict[str, Any]:
    """The reason `no_target`: part `why`'s reasons on each target."""
    shown = [{"node": str(r.target), "code": str(r.code), "args": [_plain(a) for a in r.arguments]}
             for r in rejects if str(r.target) in targets]
    return {"code": "no_target", "args": {"rejects": sorted(shown, key=lambda r: (r["node"], r["code"]))}}


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, int | str) else str(value)


def blocked_entry(unit: str, names: Sequence[str], source: str, reason: Mapping[str, Any]) -> dict[str, Any]:
    """The `derived/rebalance` record of a group that cannot move."""
    return {"group": unit[len(GROUP_PREFIX):], "members": list(names), "from": source, **reason}
