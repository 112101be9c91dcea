"""The cheap pruning pass: a few dozen candidate nodes per pending unit, so the choice program
never grounds units × nodes.

The program decides which node classes a unit may use (`class_ok`); here nodes of those classes
are ordered — preferred labels first, then emptier nodes, with a per-unit rotation so units do
not all crowd onto the same nodes — and taken until there are `min_count` of them holding at
least `headroom` × the pending replicas. Spread units take candidates from every eligible zone.
Separated units are kept apart here: nodes running (or chosen in the same round for) a unit a
unit is separated from, either way round, are left out while other nodes have room.
The knob is `CandidatePolicy`.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ccattler.engine.placement.model import Cluster

if TYPE_CHECKING:
    from ccattler.engine.placement.context import PlanContext


@dataclass(frozen=True, slots=True)
class CandidatePolicy:
    #: 40 nodes holding 4 × the pending replicas (was 16 / 2 ×: under tight capacity the large
    #: replicas solved last found too few unfragmented nodes; bench/tight_bench.py)
    min_count: int = 40
    headroom: int = 4


@dataclass(frozen=True, slots=True)
class UnitNeed:
    """What a unit asks of a node, summed over its member services."""

    cpu: int
    mem: int
    spread: bool
    prefer: tuple[tuple[str, str, int], ...]


def unit_needs(cluster: Cluster, members: Mapping[str, list[str]]) -> dict[str, UnitNeed]:
    needs = {}
    for unit, names in members.items():
        services = [cluster.services[n] for n in names]
        needs[unit] = UnitNeed(
            sum(s.cpu for s in services),
            sum(s.mem for s in services),
            any(s.spread for s in services),
            tuple(p for s in services for p in s.prefer),
        )
    return needs


def _rotation(unit: str) -> int:
    return int.from_bytes(hashlib.blake2b(unit.encode(), digest_size=4).digest(), "big")


def free_order(cluster: Cluster, used: Mapping[str, tuple[int, int]]) -> list[str]:
    """Ready nodes, emptiest first (in 10% buckets of the larger used share), then by name."""
    def bucket(name: str) -> int:
        node = cluster.nodes[name]
        cpu, mem = used.get(name, (0, 0))
        share = max(cpu * 10 // node.cpu if node.cpu else 10, mem * 10 // node.mem if node.mem else 10)
        return share
    ready = [n for n in sorted(cluster.nodes) if cluster.nodes[n].condition == "ready"]
    return sorted(ready, key=lambda n: (bucket(n), n))


def choose(
    ctx: PlanContext,
    order: list[str],
    allowed: Mapping[str, set[str]],
    pending: Mapping[str, int],
    used: Mapping[str, tuple[int, int]],
    quotas: Mapping[str, Mapping[str, int]] | None = None,
    avoid: Mapping[str, set[str]] | None = None,
    apart: Mapping[str, set[str]] | None = None,
) -> dict[str, list[str]]:
    """unit → its candidate nodes, deterministic for the same inputs. A spread unit with `quotas`
    (zone → new replicas) takes nodes only in zones with a quota, enough for it in each; nodes in
    `avoid[unit]` (they run a service it is separated from) are left out while others have room,
    and so are the candidates of the units in `apart[unit]` (pending in this round, separated
    from): those are chosen first, so two separated units solved together get disjoint nodes."""
    cluster, classes, needs, policy = ctx.cluster, ctx.classes, ctx.needs, ctx.options.candidates
    quotas = quotas or {}
    avoid = avoid or {}
    apart = apart or {}
    chosen: dict[str, list[str]] = {}
    for unit in sorted(pending, key=lambda u: (bool(apart.get(u)), u)):
        reps = allowed.get(unit, set())
        need = needs[unit]
        want = pending[unit]
        if not reps or want <= 0:
            chosen[unit] = []
            continue
        start = _rotation(unit) % len(order) if order else 0
        rotated = order[start:] + order[:start] if not need.prefer else order

        if need.prefer:
            wanted = {(k, v): w for k, v, w in need.prefer}
            weight = {
                rep: -sum(wanted.get(pair, 0) for pair in cluster.nodes[rep].labels) for rep in reps
            }
            scan = sorted((n for n in order if classes[n] in reps), key=lambda n: weight[classes[n]])
        else:
            scan = rotated
        quota = quotas.get(unit)
        shunned = set(avoid.get(unit, ()))
        for other in sorted(apart.get(unit, ())):
            shunned.update(chosen.get(other, ()))
        by_zone: dict[object, list[tuple[str, int]]] = defaultdict(list)
        kept: dict[object, list[tuple[str, int]]] = defaultdict(list)
        total = count = 0
        for name in scan:
            if classes[name] not in reps:
                continue
            if quota is not None and not quota.get(cluster.nodes[name].zone):
                continue
            node = cluster.nodes[name]
            cpu, mem = used.get(name, (0, 0))
            room = want
            if need.cpu:
                room = min(room, (node.cpu - cpu) // need.cpu)
            if need.mem:
                room = min(room, (node.mem - mem) // need.mem)
            if room <= 0:
                continue
            if name in shunned:
                kept[node.zone if need.spread else None].append((name, room))
                continue
            by_zone[node.zone if need.spread else None].append((name, room))
            total += room
            count += 1
            if not need.spread and count >= policy.min_count and total >= policy.headroom * want:
                break
        if kept and quota is not None:
            for zone, rest in kept.items():  # a zone without room elsewhere for its quota yields
                if sum(r for _, r in by_zone.get(zone, ())) < quota.get(zone, 0):
                    by_zone[zone].extend(rest)
        elif kept and sum(r for z in by_zone.values() for _, r in z) < want:
            for zone, rest in kept.items():  # not enough room elsewhere: separation yields
                by_zone[zone].extend(rest)
        if quota is not None:
            chosen[unit] = _take_quota(by_zone, quota, policy)
        elif need.spread:
            chosen[unit] = _take(by_zone, want, policy)
        else:
            chosen[unit] = [n for n, _ in by_zone[None]]
    return {unit: chosen[unit] for unit in sorted(chosen)}


def _take_quota(by_zone: Mapping[object, list[tuple[str, int]]], quota: Mapping[str, int],
                policy: CandidatePolicy) -> list[str]:
    """In each zone with a quota, nodes in scan order until they hold `headroom` × its quota."""
    taken = []
    per_zone = max(1, policy.min_count // max(1, len(quota)))
    for zone in sorted(quota):
        total = 0
        for count, (name, room) in enumerate(by_zone.get(zone, ())):
            if count >= per_zone and total >= policy.headroom * quota[zone]:
                break
            taken.append(name)
            total += room
    return taken


def _take(by_zone: Mapping[object, list[tuple[str, int]]], want: int, policy: CandidatePolicy) -> list[str]:
    """Round-robin over zones until enough nodes and room are taken."""
    taken: list[str] = []
    total = 0
    queues = [list(reversed(by_zone[z])) for z in sorted(by_zone, key=str)]
    while any(queues) and (len(taken) < policy.min_count or total < policy.headroom * want):
        for queue in queues:
            if queue:
                name, room = queue.pop()
                taken.append(name)
                total += room
    return taken
