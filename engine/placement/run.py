"""Run rules/placement.lp over a `Cluster`: static filter, candidates, choice, then reasons.

`plan(cluster)` returns where every unplaced instance goes (instance keys → node) and, for what
fits nowhere, the per-node `reject` reasons. Pending units are solved in chunks of about
`PlanOptions.chunk_replicas` replicas, one after another (each sees the previous placements),
units with hard node constraints and large replicas first.
Each round is one Session: ground `base`, read the allowed node classes, add candidates, ground
`place`, solve within the budget; another round runs (up to `max_rounds`) while a round places
something and replicas are left.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clingo import SymbolType

from ccattler.engine.placement.candidates import CandidatePolicy, choose, free_order, unit_needs
from ccattler.engine.placement.context import PlanContext
from ccattler.engine.placement.facts import node_classes, node_facts, work_facts
from ccattler.engine.placement.model import Cluster, Instance
from ccattler.engine.placement.spread import ZoneShort, zone_quotas
from ccattler.engine.solve.decode import Reject, decode
from ccattler.engine.solve.program import load_program
from ccattler.engine.solve.solver import Session, SolveOptions
from ccattler.engine.solve.symbols import Const, atom, to_python

PROGRAM = "placement"


@dataclass(frozen=True, slots=True)
class PlanOptions:
    solve: SolveOptions = field(default_factory=lambda: SolveOptions(
        conflicts=200, wall_seconds=20.0, extra=("--heuristic=Domain",)))
    candidates: CandidatePolicy = field(default_factory=CandidatePolicy)
    max_rounds: int = 3
    #: Pending replicas solved together; larger chunks are solved one after another.
    chunk_replicas: int = 1000
    #: Rounds placing at most this many replicas first try core-guided optimisation (proves small
    #: plans optimal in milliseconds; on large ones it finds no model in budget and only costs time).
    core_guided_below: int = 200
    core_guided_conflicts: int = 2_000
    #: Decode every objective term into `Plan.costs` (explain wants them; the controller does not).
    keep_costs: bool = False
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
    costs: tuple[Cost, ...]  # objective terms of explained units
    scores: dict[tuple[str, str], int]  # (unit, node) → preference cost of that assignment
    members: dict[str, list[str]]
    rounds: int = 0
    exhausted: bool = True
    ground_seconds: float = 0.0
    solve_seconds: float = 0.0
    #: spread unit → the zones that ended below the balanced share for lack of room
    spread_short: dict[str, tuple[ZoneShort, ...]] = field(default_factory=dict)


def _replica_order(inst: Instance) -> tuple[bool, int, str]:
    return (inst.ordinal is None, inst.ordinal or 0, inst.name)


def slots_of(cluster: Cluster, members: Mapping[str, list[str]]) -> dict[str, list[Slot]]:
    """unit → its replicas, in a stable order, for the units with something to place (a group slot
    is placed only if all its members are on one node; otherwise the whole slot is placed again).

    A group's members pair up node by node first — on each node, replica i of every member there
    is one seat — and only what is left over (unplaced instances, and placed ones without a
    partner on their node) pairs up in replica order. Pairing everything by replica order alone
    re-paired running seats whenever a new instance's name sorted between existing ones (a scale-up,
    a drain's surge), and re-placed them."""
    by_service: dict[str, list[Instance]] = defaultdict(list)
    open_services = set()
    for inst in cluster.instances:
        if inst.service in cluster.services:
            by_service[inst.service].append(inst)
            if inst.node is None:
                open_services.add(inst.service)
    slots: dict[str, list[Slot]] = {}
    for unit, names in members.items():
        if len(names) == 1 and names[0] not in open_services:
            slots[unit] = [Slot((i,), i.node) for i in by_service[names[0]]]
            continue
        lists = [sorted(by_service[n], key=_replica_order) for n in names]
        per_node: list[dict[str | None, list[Instance]]] = []
        for lst in lists:
            buckets: dict[str | None, list[Instance]] = defaultdict(list)
            for inst in lst:
                buckets[inst.node].append(inst)
            per_node.append(buckets)
        unit_slots = []
        rest: list[list[Instance]] = [[] for _ in names]
        for node in sorted({n for buckets in per_node for n in buckets if n is not None}):
            here = [buckets.get(node, []) for buckets in per_node]
            whole = min(len(h) for h in here)
            unit_slots.extend(Slot(tuple(h[index] for h in here), node) for index in range(whole))
            for left, h in zip(rest, here, strict=True):
                left.extend(h[whole:])
        for left, buckets in zip(rest, per_node, strict=True):
            left.extend(buckets.get(None, []))
        width = max((len(x) for x in rest), default=0)
        for index in range(width):
            insts = tuple(lst[index] for lst in rest if index < len(lst))
            nodes = {i.node for i in insts}
            unit_slots.append(Slot(insts, nodes.pop() if len(nodes) == 1 else None))
        slots[unit] = unit_slots
    return slots


@dataclass(slots=True)
class _State:
    """What a plan has decided so far (mutable while planning, then frozen into a `Plan`)."""

    placed: dict[tuple[str, str], int]
    used: dict[str, list[int]]
    remaining: dict[str, int]
    assigned: dict[str, list[tuple[str, int]]] = field(default_factory=lambda: defaultdict(list))
    scores: dict[tuple[str, str], int] = field(default_factory=dict)
    costs: list[Cost] = field(default_factory=list)
    rounds: int = 0
    exhausted: bool = True
    ground_seconds: float = 0.0
    solve_seconds: float = 0.0
    spread_short: dict[str, tuple[ZoneShort, ...]] = field(default_factory=dict)


def _initial_state(slots: Mapping[str, list[Slot]]) -> _State:
    placed: dict[tuple[str, str], int] = defaultdict(int)
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    remaining = {}
    for unit, unit_slots in slots.items():
        open_count = 0
        for slot in unit_slots:
            if slot.node is None:
                open_count += 1
                continue
            placed[unit, slot.node] += 1
            for inst in slot.instances:
                used[slot.node][0] += inst.cpu
                used[slot.node][1] += inst.mem
        if open_count:
            remaining[unit] = open_count
    return _State(placed, used, remaining)


def _hardest_first(cluster: Cluster, members: Mapping[str, list[str]], needs, unit: str) -> tuple:
    """Units with hard node constraints first, then larger replicas (first-fit decreasing), then
    by name: later chunks find what earlier ones left, so the pickiest go while there is choice."""
    services = [cluster.services[name] for name in members[unit]]
    picky = any(s.require or s.zone or s.arch or s.accept for s in services)
    return (not picky, -(needs[unit].cpu + needs[unit].mem), unit)


def _chunks(order: list[str], remaining: Mapping[str, int], size: int) -> list[list[str]]:
    """Pending units in `order`, cut into chunks of about `size` replicas (a unit is never split)."""
    chunks: list[list[str]] = [[]]
    total = 0
    for unit in order:
        if chunks[-1] and total + remaining[unit] > size:
            chunks.append([])
            total = 0
        chunks[-1].append(unit)
        total += remaining[unit]
    return [c for c in chunks if c]


def plan(cluster: Cluster, options: PlanOptions | None = None) -> Plan:
    """Place every pending replica: chunk by chunk, each chunk in up to `max_rounds` solves."""
    options = options or PlanOptions()
    members = cluster.units()
    slots = slots_of(cluster, members)
    state = _initial_state(slots)
    classes = node_classes(cluster.nodes.values())
    needs = unit_needs(cluster, members)
    ctx = PlanContext(cluster, members, needs, classes, node_facts(cluster.nodes, classes),
                      load_program(PROGRAM, options.extensions), options)
    order = sorted(state.remaining, key=lambda u: _hardest_first(cluster, members, needs, u))
    for chunk in _chunks(order, state.remaining, options.chunk_replicas):
        for _ in range(options.max_rounds):
            todo = {u: state.remaining[u] for u in chunk if state.remaining.get(u, 0) > 0}
            if not todo or not _round(ctx, todo, state):
                break
    remaining = sorted(u for u, p in state.remaining.items() if p > 0)
    placements = _assign_instances(slots, state.assigned)
    unplaced = {
        unit: tuple(i for s in slots[unit] if s.node is None for i in s.instances
                    if i.key not in placements)
        for unit in remaining
    }
    reasons = explain_units(cluster, members, remaining, state.placed, state.used, options)
    return Plan(placements, unplaced, reasons, tuple(state.costs), state.scores, members, state.rounds,
                state.exhausted, state.ground_seconds, state.solve_seconds,
                {u: z for u, z in state.spread_short.items() if z})


def _round(ctx: PlanContext, todo: dict[str, int], state: _State) -> bool:
    """One solve for the units in `todo`; True when it placed something."""
    cluster, options, needs = ctx.cluster, ctx.options, ctx.needs
    state.rounds += 1
    usage = {n: (c, m) for n, (c, m) in state.used.items()}
    solve_options = options.solve
    if sum(todo.values()) <= options.core_guided_below:
        solve_options = dataclasses.replace(
            solve_options, core_guided_conflicts=options.core_guided_conflicts)
    session = Session(ctx.program, solve_options)
    facts, _ = work_facts(cluster, ctx.members, todo, state.placed, usage, nodes=ctx.nodes)
    session.add_facts(facts)
    session.ground([("base", ())])
    allowed: dict[str, set[str]] = defaultdict(set)
    for sym in session.facts("class_ok", 2):
        unit, rep = sym.arguments  # each .arguments call crosses into clingo: once per atom
        allowed[unit.string].add(rep.string)
    quotas = _spread_quotas(ctx, allowed, todo, usage, state)
    avoid = _separate_avoid(ctx, todo, state.placed)
    chosen = choose(ctx, free_order(cluster, usage), allowed, todo, usage, quotas, avoid,
                    _separate_apart(ctx, todo))
    if not any(chosen.values()):
        return False
    session.add_facts(atom("candidate", u, n) for u in sorted(chosen) for n in chosen[u])
    session.add_facts(atom("zone_quota", u, z, q)
                      for u in sorted(quotas) for z, q in sorted(quotas[u].items()))
    session.ground([("place", ())])
    result = session.solve()
    state.ground_seconds += session.ground_seconds
    state.solve_seconds += result.solve_seconds
    state.exhausted = state.exhausted and result.exhausted
    progress = 0
    for a in decode(result.atoms("assign", 3), Assign):
        state.assigned[a.unit].append((a.node, a.count))
        state.placed[a.unit, a.node] += a.count
        state.remaining[a.unit] -= a.count
        progress += a.count
        state.used[a.node][0] += a.count * needs[a.unit].cpu
        state.used[a.node][1] += a.count * needs[a.unit].mem
    cost_atoms = result.atoms("cost", 5)
    _add_scores(state.scores, cost_atoms)
    if options.keep_costs:
        state.costs.extend(decode(cost_atoms, Cost))
    return progress > 0


def _spread_quotas(ctx: PlanContext, allowed, todo, usage, state: _State) -> dict[str, dict[str, int]]:
    """Spread unit → new replicas per eligible zone this round (see spread.py); the zones short of
    room are kept in `state.spread_short` for explain."""
    cluster, classes, needs = ctx.cluster, ctx.classes, ctx.needs
    quotas = {}
    for unit in sorted(todo):
        need = needs[unit]
        if not need.spread:
            continue
        room: dict[str, int] = defaultdict(int)
        reps = allowed.get(unit, set())
        for name, node in cluster.nodes.items():
            if node.zone is None or node.condition != "ready" or classes[name] not in reps:
                continue
            cpu, mem = usage.get(name, (0, 0))
            fit = todo[unit]
            if need.cpu:
                fit = min(fit, (node.cpu - cpu) // need.cpu)
            if need.mem:
                fit = min(fit, (node.mem - mem) // need.mem)
            room[node.zone] += max(fit, 0)
        placed: dict[str, int] = defaultdict(int)
        for (u, name), count in state.placed.items():
            zone = cluster.nodes[name].zone if u == unit and name in cluster.nodes else None
            if zone is not None and count > 0:
                placed[zone] += count
        if not room and not placed:
            continue
        quotas[unit], short = zone_quotas(todo[unit], placed, room)
        state.spread_short[unit] = short
    return quotas


def _separate_avoid(ctx: PlanContext, todo, placed) -> dict[str, set[str]]:
    """unit → the nodes already running a service it is separated from, or a service separated
    from it (placed in an earlier chunk or round: the pair ends apart whichever went first); kept
    out of its candidates while enough other nodes have room."""
    runs: dict[str, set[str]] = defaultdict(set)
    for (unit, name), count in placed.items():
        if count > 0:
            runs[unit].add(name)
    cluster, members = ctx.cluster, ctx.members
    apart: dict[str, set[str]] = defaultdict(set)  # unit → units it must keep off, either direction
    for unit, names in members.items():
        for target in {t for s in names for t in cluster.services[s].separate if t in cluster.services}:
            other = cluster.services[target].unit
            if other != unit:
                apart[unit].add(other)
                apart[other].add(unit)
    avoid: dict[str, set[str]] = {}
    for unit in todo:
        nodes = set().union(*(runs.get(other, set()) for other in apart.get(unit, ())))
        if nodes:
            avoid[unit] = nodes
    return avoid


def _separate_apart(ctx: PlanContext, todo) -> dict[str, set[str]]:
    """unit → the other units of this round it is separated from (their candidates are left out of
    its own: the soft term alone lost to the budget when both were placed in one solve)."""
    cluster, members = ctx.cluster, ctx.members
    apart: dict[str, set[str]] = {}
    for unit in todo:
        targets = {cluster.services[t].unit for s in members[unit] for t in cluster.services[s].separate
                   if t in cluster.services}
        targets = {t for t in targets if t in todo and t != unit}
        if targets:
            apart[unit] = targets
    return apart


def _add_scores(scores: dict[tuple[str, str], int], cost_atoms: list) -> None:
    """Sum the objective terms per (unit, node) without decoding each atom."""
    for sym in cost_atoms:
        subject, target, _, _, amount = sym.arguments
        if subject.type is SymbolType.String and target.type is SymbolType.String:
            key = (subject.string, target.string)
            scores[key] = scores.get(key, 0) + amount.number


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
    if not units:
        return {}
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
