"""Run rules/placement.lp over a `Cluster`: static filter, candidates, choice, then reasons.

`plan(cluster)` returns where every unplaced instance goes (instance keys → node) and, for what
fits nowhere, the per-node `reject` reasons. Each round is one Session: ground `base`, read the
allowed node classes, add candidates, ground `place`, solve within the budget. Another round runs
(up to `PlanOptions.max_rounds`) when replicas are left while eligible nodes still have room.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ccattler.engine.solve.decode import Reject, decode
from ccattler.engine.solve.placement.candidates import CandidatePolicy, choose, free_order, unit_needs
from ccattler.engine.solve.placement.facts import node_classes, work_facts
from ccattler.engine.solve.placement.model import Cluster, Instance
from ccattler.engine.solve.program import load_program
from ccattler.engine.solve.solver import Session, SolveOptions
from ccattler.engine.solve.symbols import Const, atom, to_python

PROGRAM = "placement"


@dataclass(frozen=True, slots=True)
class PlanOptions:
    solve: SolveOptions = field(default_factory=lambda: SolveOptions(conflicts=20_000, wall_seconds=20.0))
    candidates: CandidatePolicy = field(default_factory=CandidatePolicy)
    max_rounds: int = 3
    extensions: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class Assign:
    unit: str
    node: str
    count: int


@dataclass(frozen=True, slots=True)
class Cost:
    """One term of the objective: `cost(Subject, Target, Criterion, Level, Amount)`."""

    subject: object
    target: object
    criterion: object
    level: int
    amount: int


@dataclass(frozen=True, slots=True)
class Slot:
    """One replica of a unit: an instance, or replica i of each member of a service group."""

    instances: tuple[Instance, ...]
    node: str | None


@dataclass(frozen=True, slots=True)
class Plan:
    """The outcome: new node per instance key, reasons per unplaced unit, and how it went."""

    placements: dict[str, str]
    unplaced: dict[str, tuple[Instance, ...]]  # unit → instances left pending
    reasons: dict[str, tuple[Reject, ...]]  # unit → per-node reasons
    costs: tuple[Cost, ...]
    members: dict[str, list[str]]
    rounds: int = 0
    exhausted: bool = True
    ground_seconds: float = 0.0
    solve_seconds: float = 0.0


def slots_of(cluster: Cluster, members: Mapping[str, list[str]]) -> dict[str, list[Slot]]:
    """unit → its replicas, in a stable order; a group slot is placed only if all its members are
    on one node (otherwise the whole slot is placed again)."""
    by_service: dict[str, list[Instance]] = defaultdict(list)
    for inst in cluster.instances:
        if inst.service in cluster.services:
            by_service[inst.service].append(inst)
    slots: dict[str, list[Slot]] = {}
    for unit, names in members.items():
        lists = [sorted(by_service[n], key=lambda i: (i.ordinal is None, i.ordinal or 0, i.name))
                 for n in names]
        width = max((len(x) for x in lists), default=0)
        unit_slots = []
        for index in range(width):
            insts = tuple(lst[index] for lst in lists if index < len(lst))
            nodes = {i.node for i in insts}
            unit_slots.append(Slot(insts, nodes.pop() if len(nodes) == 1 else None))
        slots[unit] = unit_slots
    return slots


def plan(cluster: Cluster, options: PlanOptions | None = None) -> Plan:
    options = options or PlanOptions()
    members = cluster.units()
    slots = slots_of(cluster, members)
    pending = {u: sum(1 for s in ss if s.node is None) for u, ss in slots.items()}
    pending = {u: p for u, p in pending.items() if p}
    placed: dict[tuple[str, str], int] = defaultdict(int)
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for unit, unit_slots in slots.items():
        for slot in unit_slots:
            if slot.node is not None:
                placed[unit, slot.node] += 1
                for inst in slot.instances:
                    used[slot.node][0] += inst.cpu
                    used[slot.node][1] += inst.mem
    program = load_program(PROGRAM, options.extensions)
    classes = node_classes(cluster.nodes.values())
    needs = unit_needs(cluster, members)
    assigned: dict[str, list[tuple[str, int]]] = defaultdict(list)
    costs: list[Cost] = []
    rounds, exhausted, ground_s, solve_s = 0, True, 0.0, 0.0
    remaining = dict(pending)
    while remaining and rounds < options.max_rounds:
        rounds += 1
        usage = {n: (c, m) for n, (c, m) in used.items()}
        session = Session(program, options.solve)
        facts, _ = work_facts(cluster, members, remaining, placed, usage)
        session.add_facts(facts)
        session.ground([("base", ())])
        allowed: dict[str, set[str]] = defaultdict(set)
        for sym in session.facts("class_ok", 2):
            allowed[sym.arguments[0].string].add(sym.arguments[1].string)
        chosen = choose(cluster, free_order(cluster, usage), classes, allowed, remaining, needs, usage,
                        options.candidates)
        if not any(chosen.values()):
            break
        session.add_facts(atom("candidate", u, n) for u in sorted(chosen) for n in chosen[u])
        session.ground([("place", ())])
        result = session.solve()
        ground_s += session.ground_seconds
        solve_s += result.solve_seconds
        exhausted = exhausted and result.exhausted
        progress = 0
        for a in decode(result.symbols, Assign):
            assigned[a.unit].append((a.node, a.count))
            placed[a.unit, a.node] += a.count
            remaining[a.unit] -= a.count
            progress += a.count
            used[a.node][0] += a.count * needs[a.unit].cpu
            used[a.node][1] += a.count * needs[a.unit].mem
        costs.extend(decode(result.symbols, Cost))
        remaining = {u: p for u, p in remaining.items() if p > 0}
        if not progress:
            break
    placements = _assign_instances(slots, assigned)
    unplaced = {
        unit: tuple(i for s in slots[unit] if s.node is None for i in s.instances
                    if i.key not in placements)
        for unit in remaining
    }
    reasons = explain_units(cluster, members, sorted(remaining), placed, used, options) if remaining else {}
    return Plan(placements, unplaced, reasons, tuple(costs), members, rounds, exhausted, ground_s, solve_s)


def _assign_instances(
    slots: Mapping[str, list[Slot]], assigned: Mapping[str, list[tuple[str, int]]]
) -> dict[str, str]:
    """Pending slots in order get the assigned nodes in name order: instance key → node."""
    placements = {}
    for unit, pairs in assigned.items():
        nodes = [node for node, count in sorted(pairs) for _ in range(count)]
        open_slots = [s for s in slots[unit] if s.node is None]
        for slot, node in zip(open_slots, nodes, strict=False):
            for inst in slot.instances:
                placements[inst.key] = node
    return placements


def explain_units(
    cluster: Cluster,
    members: Mapping[str, list[str]],
    units: list[str],
    placed: Mapping[tuple[str, str], int],
    used: Mapping[str, list[int] | tuple[int, int]],
    options: PlanOptions,
) -> dict[str, tuple[Reject, ...]]:
    """Per-node reasons (part `why`) for `units`, against the given usage."""
    session = Session(load_program(PROGRAM, options.extensions), options.solve)
    usage = {n: (c, m) for n, (c, m) in used.items()}
    facts, _ = work_facts(cluster, members, {}, placed, usage, explain=units)
    session.add_facts(facts)
    session.ground([("base", ()), ("why", ())])
    reasons: dict[str, list[Reject]] = defaultdict(list)
    for sym in sorted(session.facts("reject", 4)):
        unit, target, code, args = (to_python(a) for a in sym.arguments)
        if isinstance(code, Const):
            reasons[str(unit)].append(Reject(unit, target, code, args))
    return {u: tuple(reasons.get(u, ())) for u in units}
