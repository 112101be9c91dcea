"""A bounded re-solve of rules/placement.lp (parts place + rebalance): given replicas that may
move off one loaded node, where should at most `max_moves` of them go?

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
from ccattler.engine.placement.run import PROGRAM, Assign, PlanOptions
from ccattler.engine.solve.decode import decode
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
    placed: dict[tuple[str, str], int] = defaultdict(int)
    for inst in cluster.instances:
        if inst.node is not None and inst.service in cluster.services:
            placed[cluster.services[inst.service].unit, inst.node] += 1
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
