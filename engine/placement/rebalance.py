"""A bounded re-solve of rules/placement.lp (parts place + rebalance): given replicas that may
move off one loaded node, where should at most `max_moves` of them go?

A unit is a service or a service group; a group's replica is a seat (replica i of every member,
on one node), which moves whole: the program places the unit with its members' summed requests.
The movable replicas are pending again (`current` says where they run; staying is free, a move
costs), every other placement is a fact, the candidates are the source and a few of the least
loaded nodes that pass the unit's static filter (hard constraints: labels, zone, architecture,
restrictions, capacity), and `move_cap` / `move_budget` cap the moves overall and per unit. The
same program, the same facts and the same objective as placing new instances, plus a balance
term — not a second scheduler.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ccattler.engine.placement.facts import node_classes, node_facts, work_facts
from ccattler.engine.placement.model import Cluster
from ccattler.engine.placement.run import PROGRAM, Assign, PlanOptions, explain_units, slots_of
from ccattler.engine.solve.decode import Reject, decode
from ccattler.engine.solve.program import load_program
from ccattler.engine.solve.solver import Session
from ccattler.engine.solve.symbols import atom


@dataclass(frozen=True, slots=True)
class Move:
    """`count` replicas of `unit` go from `source` to `target`."""

    unit: str
    target: str
    count: int


def usage(cluster: Cluster) -> dict[str, tuple[int, int]]:
    """node → (millicores, MiB) requested by the instances placed on it."""
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for inst in cluster.instances:
        if inst.node is not None:
            used[inst.node][0] += inst.cpu
            used[inst.node][1] += inst.mem
    return {n: (c, m) for n, (c, m) in used.items()}


def _placed(cluster: Cluster, members: Mapping[str, list[str]]) -> dict[tuple[str, str], int]:
    """(unit, node) → replicas running there; a group's seat (its members on one node) is one."""
    placed: dict[tuple[str, str], int] = defaultdict(int)
    for unit, slots in slots_of(cluster, members).items():
        for slot in slots:
            if slot.node is not None:
                placed[unit, slot.node] += 1
    return placed


def kept_reasons(cluster: Cluster, unit: str, options: PlanOptions | None = None) -> tuple[Reject, ...]:
    """Part `why`'s per-node reasons for one more replica of `unit` against the cluster as it is
    (why a movable replica stayed: no room on a target, a label, or room but not chosen)."""
    members = cluster.units()
    return explain_units(cluster, members, [unit], _placed(cluster, members), usage(cluster),
                         options or PlanOptions()).get(unit, ())


def resolve(
    cluster: Cluster,
    source: str,
    targets: Sequence[str],
    movable: Mapping[str, int],
    budgets: Mapping[str, int],
    max_moves: int = 2,
    options: PlanOptions | None = None,
) -> list[Move]:
    """The moves off `source` (unit → replicas that may move, each unit's budget) the program
    chooses; [] when staying put is best."""
    options = options or PlanOptions()
    movable = {u: k for u, k in movable.items() if k > 0 and budgets.get(u, 0) > 0}
    if not movable or not targets or max_moves <= 0:
        return []
    members = cluster.units()
    placed = _placed(cluster, members)
    used = {n: list(v) for n, v in usage(cluster).items()}
    for unit, count in movable.items():
        placed[unit, source] -= count
        cpu = sum(cluster.services[s].cpu for s in members[unit])
        mem = sum(cluster.services[s].mem for s in members[unit])
        used[source][0] -= count * cpu
        used[source][1] -= count * mem
    classes = node_classes(cluster.nodes.values())
    session = Session(load_program(PROGRAM, options.extensions), options.solve)
    facts, _ = work_facts(cluster, members, movable, placed, {n: (c, m) for n, (c, m) in used.items()},
                          nodes=node_facts(cluster.nodes, classes))
    session.add_facts(facts)
    session.ground([("base", ())])
    allowed: dict[str, set[str]] = defaultdict(set)
    for sym in session.facts("class_ok", 2):
        unit, rep = sym.arguments
        allowed[unit.string].add(rep.string)
    nodes = [source, *(t for t in targets if t != source)]
    session.add_facts(atom("candidate", u, n) for u in sorted(movable) for n in nodes
                      if classes.get(n) in allowed.get(u, ()))
    session.add_facts(atom("current", u, source, k) for u, k in sorted(movable.items()))
    session.add_facts([atom("move_cap", max_moves)])
    session.add_facts(atom("move_budget", u, budgets[u]) for u in sorted(movable))
    session.ground([("place", ()), ("rebalance", ())])
    result = session.solve()
    moves = []
    for a in decode(result.atoms("assign", 3), Assign):
        if a.node != source:
            moves.append(Move(a.unit, a.node, a.count))
    return sorted(moves, key=lambda m: (m.unit, m.target))
