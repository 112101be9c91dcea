"""Rebalancing: when ready nodes are unevenly loaded (a node joined, a drain ended), move at most
`max_moves` instances per cycle from the most loaded node to the least loaded ones.

The choice is the placement program's (`engine/placement/rebalance.py`: a bounded re-solve, the
current assignment preferred, moves capped); this module decides *whether* a cycle runs and what
may move: never during a drain, while instances wait for a node, within `grace` seconds of the
controller's start-up (agents re-registering after a restart would otherwise trigger a herd of
moves), sooner than `interval` after the previous cycle, or while that cycle's moves are not done;
only ready instances of services whose budget allows a disruption, never one moved in the last
`cooldown` seconds, never a service mid-rollout. A service group's seat (replica i of every member,
on one node) moves as one unit within every member's budget (engine/disruption/group_moves.py);
why a group on the loaded node cannot move is recorded too. Time is the `now` of the reconcile.
Each move is recorded with its gain ("n3 92 % cpu → 70 %") for `cca explain`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ccattler.engine.disruption import budget
from ccattler.engine.disruption.drain import rollout_active
from ccattler.engine.disruption.group_moves import blocked_entry, group_candidates, kept_reason
from ccattler.engine.facts.keys import REBALANCE
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.placement.model import GROUP_PREFIX, Cluster
from ccattler.engine.placement.rebalance import kept_reasons, resolve, usage

if TYPE_CHECKING:
    from ccattler.engine.disruption.controller import View
    from ccattler.engine.disruption.drain import Step


@dataclass(frozen=True, slots=True)
class RebalanceOptions:
    max_moves: int = 2
    interval: float = 60.0  # seconds between cycles
    cooldown: float = 300.0  # an instance moved this recently does not move again
    grace: float = 60.0  # after the controller's start-up
    spread: int = 20  # percentage points between the most and the least loaded ready node
    targets: int = 3  # least loaded nodes offered to the solve
    enabled: bool = True


def shares(cluster: Cluster) -> dict[str, tuple[int, str]]:
    """Ready node → (its larger used share in percent, which resource)."""
    used = usage(cluster)
    out = {}
    for name, node in sorted(cluster.nodes.items()):
        if node.condition != "ready" or not (node.cpu or node.mem):
            continue
        cpu, mem = used.get(name, (0, 0))
        cpu_share = cpu * 100 // node.cpu if node.cpu else 0
        mem_share = mem * 100 // node.mem if node.mem else 0
        out[name] = (cpu_share, "cpu") if cpu_share >= mem_share else (mem_share, "memory")
    return out


def _share(cluster: Cluster, node: str, cpu: int, mem: int, resource: str) -> int:
    n = cluster.nodes[node]
    if resource == "cpu":
        return cpu * 100 // n.cpu if n.cpu else 0
    return mem * 100 // n.mem if n.mem else 0


def rebalance(
    snapshot: Snapshot, v: View, steps: Mapping[str, Step], now: float, started: float,
    options: RebalanceOptions, weighed: float | None = None,
) -> tuple[dict[str, dict[str, str]], dict[str, Any] | None, bool]:
    """(service → {instance: target node} to ask placement for, the new `derived/rebalance`
    document or None to leave it as it is, whether this call weighed the nodes' loads). Loads are
    weighed at most once an `interval` (`weighed`: when they were last): weighing builds the whole
    cluster model (~0.4 s at 10,000 instances), and an idle cluster woke the controller every 30 s
    to do it."""
    previous = snapshot.get(REBALANCE)
    previous = previous if isinstance(previous, Mapping) else {}
    at = previous.get("at")
    recent = {k: t for k, t in (previous.get("recent") or {}).items()
              if isinstance(t, (int, float)) and now - t < options.cooldown}
    outstanding: dict[str, dict[str, str]] = defaultdict(dict)
    unfinished = False
    for move in previous.get("moves") or ():
        if not isinstance(at, (int, float)) or now - at >= options.cooldown:
            continue  # long past: not waited for
        for full, instance in _moved(move):
            member = {m.name: m for m in v.members.get(full, ())}.get(instance.split("/", 1)[1])
            if member is None:
                continue  # gone: not waited for
            if member.node != move["to"]:
                if now - at < options.interval:  # placement applies a move at once or never
                    outstanding[full][member.name] = move["to"]
                    unfinished = True
            elif not member.ready:
                unfinished = True
    keep = _keep(previous, recent)
    if (not options.enabled or unfinished or steps or v.pending or now - started < options.grace
            or (isinstance(at, (int, float)) and now - at < options.interval)
            or (weighed is not None and now - weighed < options.interval)):
        return dict(outstanding), keep, False
    cluster = Cluster.from_snapshot(snapshot)
    loads = shares(cluster)
    if len(loads) < 2:
        return {}, _keep(previous, recent, []), True
    order = sorted(loads, key=lambda n: (-loads[n][0], n))
    source = order[0]
    targets = sorted(order[1:], key=lambda n: (loads[n][0], n))[: options.targets]
    if loads[source][0] - loads[targets[0]][0] < options.spread:
        return {}, _keep(previous, recent, []), True
    movable, budgets, candidates = _movable(cluster, v, source, recent)
    groups = group_candidates(cluster, v, source, recent)
    for unit, seats in groups.seats.items():
        movable[unit], budgets[unit], candidates[unit] = len(seats), groups.budgets[unit], list(seats)
    moves = resolve(cluster, source, targets, movable, budgets, options.max_moves)
    blocked = dict(groups.blocked)
    for unit in sorted(set(groups.seats) - {m.unit for m in moves}):
        blocked[unit] = kept_reason(kept_reasons(cluster, unit), targets)
    members = cluster.units()
    blocked_entries = [blocked_entry(u, members[u], source, r) for u, r in sorted(blocked.items())]
    if not moves:
        return {}, _keep(previous, recent, blocked_entries), True
    targets_of, record = _record(cluster, source, moves, candidates, recent, now, loads[source][1])
    return targets_of, {**record, "blocked": blocked_entries}, True


def _moved(move: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(full service, "tenant/instance") of each instance a recorded move took."""
    if "members" in move:
        return [(m["service"], m["instance"]) for m in move["members"]]
    return [(move["service"], move["instance"])]


def _keep(previous: Mapping[str, Any], recent: Mapping[str, float],
          blocked: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The previous record with the cooldowns pruned (and this cycle's blocked groups, when one ran)."""
    if not previous and not blocked:
        return None
    out = {**previous, "recent": dict(sorted(recent.items()))}
    if blocked is not None:
        out["blocked"] = blocked
    return out


def _movable(cluster: Cluster, v: View, source: str, recent: Mapping[str, float]):
    """unit → movable replicas on `source`, unit → budget, unit → their seats (one (full service,
    name) each: a solo service's replica is one instance)."""
    movable: dict[str, int] = {}
    budgets: dict[str, int] = {}
    candidates: dict[str, list[tuple[str, str]]] = {}
    for full, members in sorted(v.members.items()):
        service_doc = v.services.get(full)
        service = cluster.services.get(full)
        if service_doc is None or service is None or service.group:
            continue  # a group member moves with its seat (group_moves.py)
        if rollout_active(v.rollouts.get(full), members):
            continue
        tenant = full.split("/", 1)[0]
        allowed = budget.disruptions_allowed(service_doc, sum(m.ready for m in members))
        here = [m.name for m in members
                if m.node == source and m.ready and f"{tenant}/{m.name}" not in recent]
        if allowed > 0 and here:
            movable[full], budgets[full] = len(here), allowed
            candidates[full] = [((full, name),) for name in here]
    return movable, budgets, candidates


def _record(cluster: Cluster, source: str, moves, candidates, recent, now: float, resource: str):
    used = {n: list(x) for n, x in usage(cluster).items()}
    targets_of: dict[str, dict[str, str]] = defaultdict(dict)
    entries = []
    recent = dict(recent)
    for move in moves:
        seats, candidates[move.unit] = candidates[move.unit][: move.count], candidates[move.unit][move.count:]
        for seat in seats:
            cpu = sum(cluster.services[full].cpu for full, _ in seat)
            mem = sum(cluster.services[full].mem for full, _ in seat)
            src_before = _share(cluster, source, *used[source], resource)
            dst = used.setdefault(move.target, [0, 0])
            dst_before = _share(cluster, move.target, *dst, resource)
            used[source][0] -= cpu
            used[source][1] -= mem
            dst[0] += cpu
            dst[1] += mem
            src_after = _share(cluster, source, *used[source], resource)
            dst_after = _share(cluster, move.target, *dst, resource)
            gain = (f"{source} {src_before} % {resource} → {src_after} %, "
                    f"{move.target} {dst_before} % → {dst_after} %")
            shown = []
            for full, name in seat:
                instance = f"{full.split('/', 1)[0]}/{name}"
                targets_of[full][name] = move.target
                recent[instance] = now
                shown.append({"service": full, "instance": instance})
            where = {"from": source, "to": move.target, "gain": gain}
            if move.unit.startswith(GROUP_PREFIX):
                entries.append({"group": move.unit[len(GROUP_PREFIX):], "members": shown, **where})
            else:
                entries.append({"instance": shown[0]["instance"], "service": shown[0]["service"], **where})
    record = {"at": now, "moves": entries, "recent": dict(sorted(recent.items()))}
    return dict(targets_of), record
