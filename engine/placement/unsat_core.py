"""The minimal set of facts that keeps a unit from being placed: an unsat core, shrunk by deletion.

The placement program always has a model (unplaced replicas are a soft violation), so this is a
separate check (part `check` of rules/placement.lp): placing one replica of the unit is a hard
requirement, and every fact that can block a placement is an assumption. clingo's core is then
shrunk by deleting one fact at a time while the check stays unsatisfiable (as clingo-explaid does).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from clingo import Symbol

from ccattler.engine.facts import display_name
from ccattler.engine.placement.facts import node_facts, work_facts
from ccattler.engine.placement.model import Cluster
from ccattler.engine.placement.run import PROGRAM, PlanOptions
from ccattler.engine.solve.program import load_program
from ccattler.engine.solve.solver import Session
from ccattler.engine.solve.symbols import to_python

#: Facts whose presence can only block a placement (never enable one), so deleting one of them
#: can only help; everything else (capacity, zones, labels, acceptances) is fixed in the check.
ASSUMABLE = frozenset({"require", "pin_zone", "pin_arch", "node_restrict", "node_used", "node_unready"})
#: How many node names a grouped blocker lists before "+N more".
SHOW_NODES = 5


def blocking_facts(
    cluster: Cluster,
    members: Mapping[str, list[str]],
    unit: str,
    placed: Mapping[tuple[str, str], int],
    used: Mapping[str, list[int] | tuple[int, int]],
    options: PlanOptions,
) -> tuple[str, ...]:
    """English lines for a minimal set of facts without which one replica of `unit` would fit."""
    usage = {n: (c, m) for n, (c, m) in used.items()}
    own_classes = {name: name for name in cluster.nodes}  # every node its own class: per-node facts
    facts, _ = work_facts(cluster, members, {unit: 1}, placed, usage, explain=[unit],
                          nodes=node_facts(cluster.nodes, own_classes))
    fixed = [f for f in facts if f.name not in ASSUMABLE]
    assumable = sorted({f for f in facts if f.name in ASSUMABLE})
    session = Session(load_program(PROGRAM, options.extensions), options.solve)
    session.add_facts(fixed)
    literals = session.add_assumable(assumable)
    session.ground([("base", ()), ("place", ()), ("check", ())])
    everything = list(literals.values())
    first = session.solve(assumptions=everything, optimize=False)
    if first.satisfiable is not False:
        return ()
    # Try deleting node facts before the service's own requirements, so an explanation names
    # what the service asks for whenever that alone suffices.
    by_literal = {lit: sym for sym, lit in literals.items()}
    in_core = set(first.core)
    core = sorted((lit for lit in everything if lit in in_core),
                  key=lambda lit: (not by_literal[lit].name.startswith("node_"), lit))
    index = 0
    while index < len(core):
        trial = core[:index] + core[index + 1:]
        keep = set(trial)
        result = session.solve(assumptions=trial + [-lit for lit in everything if lit not in keep],
                               optimize=False)
        if result.satisfiable is False:
            core = trial
        else:
            index += 1
    if not core:  # unsatisfiable whatever is deleted: only node capacities (fixed) are left
        return (_too_big(cluster, members, unit),)
    return tuple(_describe([by_literal[lit] for lit in core]))


def _too_big(cluster: Cluster, members: Mapping[str, list[str]], unit: str) -> str:
    services = [cluster.services[name] for name in members.get(unit, ()) if name in cluster.services]
    cpu, mem = sum(s.cpu for s in services), sum(s.mem for s in services)
    if not cluster.nodes:
        return "the cluster has no nodes"
    most_cpu = max(n.cpu for n in cluster.nodes.values())
    most_mem = max(n.mem for n in cluster.nodes.values())
    return (f"no node is big enough for one replica: it needs {cpu}m cpu and {mem}Mi memory; "
            f"the largest node has {most_cpu}m cpu, the most memory is {most_mem}Mi")


def _describe(blockers: list[Symbol]) -> list[str]:
    """Service facts one per line; node facts grouped by what they say."""
    lines: list[str] = []
    nodes: dict[tuple[object, ...], list[str]] = defaultdict(list)
    for sym in sorted(blockers):
        args = [to_python(a) for a in sym.arguments]
        if sym.name.startswith("node_"):
            detail = tuple(args[1:]) if sym.name != "node_used" else ()
            nodes[sym.name, detail].append(str(args[0]))
            continue
        service = display_name(*str(args[0]).split("/", 1))
        if sym.name == "require":
            lines.append(f"{service} requires label {args[1]}={args[2]}")
        elif sym.name == "pin_zone":
            lines.append(f"{service} is pinned to zone {args[1]}")
        elif sym.name == "pin_arch":
            lines.append(f"{service} requires architecture {args[1]}")
    for (name, detail), names in sorted(nodes.items()):
        shown = ", ".join(names[:SHOW_NODES]) + (f" (+{len(names) - SHOW_NODES} more)"
                                                 if len(names) > SHOW_NODES else "")
        value = detail[0] if detail else "?"
        one = len(names) == 1
        what = {
            "node_used": ("is" if one else "are") + " full with the requests already placed there",
            "node_restrict": ("restricts " if one else "restrict ") + str(value),
            "node_unready": ("is " if one else "are ") + str(value),
        }.get(name, name)
        lines.append(f"{'node' if one else 'nodes'} {shown} {what}")
    return lines
