"""Why a unit is placed where it is: score terms on its nodes, filtered nodes by reason, and for
what fits nowhere the minimal set of facts that blocks it (an unsat core shrunk by deletion).

`explain(snapshot, "web")` works on any snapshot (offline `cca plan --explain`, or a live one);
the knob is `PlanOptions` (solver budget, operator extension directories).
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ccattler.engine.facts import CcaError, display_name, parse_service, placement_key
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.placement.facts import node_classes, node_facts, work_facts
from ccattler.engine.placement.model import Cluster
from ccattler.engine.placement.reasons import describe, render, summarize
from ccattler.engine.placement.run import PROGRAM, Cost, PlanOptions, explain_units, plan
from ccattler.engine.placement.spread import ZoneShort, zone_quotas
from ccattler.engine.placement.unsat_core import blocking_facts
from ccattler.engine.solve.decode import Reject, decode
from ccattler.engine.solve.program import load_program
from ccattler.engine.solve.solver import Session
from ccattler.engine.solve.symbols import Const, atom


class UnknownTarget(CcaError):
    """`--explain` names no service or instance of the plan."""


@dataclass(frozen=True, slots=True)
class NodeScore:
    """A chosen node: how many replicas went there and the objective terms they cost."""

    node: str
    replicas: int
    terms: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(amount for _, amount in self.terms)


@dataclass(frozen=True, slots=True)
class Explanation:
    """The answer to "why here, why not there" for one service (or the service of an instance)."""

    service: str
    unit: str
    chosen: tuple[NodeScore, ...]
    filtered: tuple[dict[str, Any], ...]  # summarized reasons of the other nodes
    unplaced: int
    blockers: tuple[str, ...] = ()
    #: zone spread units: replicas per eligible zone, and the zones short of room (skew > 1)
    zones: tuple[tuple[str, int], ...] = ()
    short: tuple[ZoneShort, ...] = ()
    #: placed replicas: (node, revision, score) as recorded when they were placed
    placed_at: tuple[tuple[str, int | None, int | None], ...] = ()
    #: where the placed replicas would go if placed again now (same terms as `chosen`)
    now: tuple[NodeScore, ...] = ()

    def history_lines(self) -> list[str]:
        """Already-placed replicas do not move: when they were placed, and where they would go now."""
        if not self.placed_at:
            return []
        out = [f"{node}: placed at revision {rev if rev is not None else '?'} with score "
               f"{score if score is not None else '?'}" for node, rev, score in self.placed_at]
        here = {(c.node, c.replicas) for c in self.chosen}
        if not self.now:
            out.append("if re-placed now: nowhere (it would not fit)")
        elif {(c.node, c.replicas) for c in self.now} == here:
            out.append("if re-placed now: the same nodes")
        else:
            out.append("if re-placed now: " + "; ".join(
                f"{c.node} x{c.replicas} (score {c.total}: "
                f"{', '.join(f'{k} {v:+d}' for k, v in c.terms) or 'no cost'})" for c in self.now)
                + f" (total {sum(c.total for c in self.now)} against "
                  f"{sum(c.total for c in self.chosen)} where they run)")
        return out

    def spread_lines(self) -> list[str]:
        if not self.zones:
            return []
        out = ["zone spread: " + ", ".join(f"{z} {n}" for z, n in self.zones)]
        out += [f"zone {s.zone} lacks room: {s.has} replica(s) against {s.top}, its eligible nodes fit "
                f"{s.room} more (cpu or memory)" for s in self.short]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "chosen": [{"node": c.node, "replicas": c.replicas, "score": c.total,
                        "terms": [{"criterion": k, "cost": v} for k, v in c.terms]} for c in self.chosen],
            "filtered": [{"reason": describe(r["code"], r["args"], r["nodes"]), "code": r["code"],
                          "args": r["args"], "nodes": r["nodes"]} for r in self.filtered],
            "unplaced": self.unplaced,
            "blocked_by": list(self.blockers),
            "placed_at": [{"node": n, "revision": r, "score": sc} for n, r, sc in self.placed_at],
            "now": [{"node": c.node, "replicas": c.replicas, "score": c.total,
                     "terms": [{"criterion": k, "cost": v} for k, v in c.terms]} for c in self.now],
            "zones": dict(self.zones),
            "zones_short": [{"zone": s.zone, "replicas": s.has, "fullest": s.top, "room": s.room}
                            for s in self.short],
        }

    def __rich__(self) -> Group:
        parts: list[Any] = [Text(f"service {self.service}", style="bold")]
        if self.chosen:
            table = Table(box=None, header_style="bold", pad_edge=False)
            for column in ("NODE", "REPLICAS", "SCORE", "TERMS (lower is better)"):
                table.add_column(column)
            for c in self.chosen:
                terms = ", ".join(f"{k} {v:+d}" for k, v in c.terms) or "-"
                table.add_row(c.node, str(c.replicas), str(c.total), terms)
            parts += [table]
        parts += [Text(line) for line in self.history_lines()]
        parts += [Text(line, style="bold" if i == 0 else "red") for i, line in enumerate(self.spread_lines())]
        if self.filtered:
            parts += [Text("other nodes:", style="bold")]
            parts += [Text(f"  * {render(r)}") for r in self.filtered]
        if self.unplaced:
            parts += [Text(f"{self.unplaced} replica(s) unplaced, blocked by:", style="bold red")]
            blockers = self.blockers or ("(no single fact: the cluster is too small)",)
            parts += [Text(f"  * {b}") for b in blockers]
        return Group(*parts)

    def lines(self) -> list[str]:
        out = [f"service {self.service}"]
        for c in self.chosen:
            terms = ", ".join(f"{k} {v:+d}" for k, v in c.terms) or "no cost"
            out.append(f"  {c.node}: {c.replicas} replica(s), score {c.total} ({terms})")
        out.extend(f"  {line}" for line in self.history_lines())
        out.extend(f"  {line}" for line in self.spread_lines())
        if self.filtered:
            out.append("  other nodes:")
            out.extend(f"    {render(r)}" for r in self.filtered)
        if self.unplaced:
            out.append(f"  {self.unplaced} replica(s) unplaced, blocked by:")
            out.extend(f"    {b}" for b in self.blockers or ("(no single fact: the cluster is too small)",))
        return out


def _criterion(term: object) -> str:
    return str(term).replace('"', "")


def resolve(cluster: Cluster, target: str) -> str:
    """The service `target` names: a service (`web`, `t/web`) or one of its instances."""
    ref = parse_service(target) if target.count("/") <= 1 else None
    if ref is not None and ref.full in cluster.services:
        return ref.full
    for inst in cluster.instances:
        if display_name(inst.tenant, inst.name) == target or f"{inst.tenant}/{inst.name}" == target:
            return inst.service
    # Only the target's tenant's services are named: the caller may read no other tenant.
    tenant = ref.tenant if ref is not None else None
    known = ", ".join(sorted(display_name(*s.split("/", 1)) for s in cluster.services
                             if tenant is None or s.split("/", 1)[0] == tenant)) or "none"
    raise UnknownTarget(f"no service or instance {target!r} (services: {known})")


def explain(snapshot: Snapshot, target: str, options: PlanOptions | None = None) -> Explanation:
    options = options or PlanOptions()
    cluster = Cluster.from_snapshot(snapshot)
    service = resolve(cluster, target)
    unit = cluster.services[service].unit
    members = cluster.units()
    mine = [i for i in cluster.instances if cluster.services.get(i.service) and
            cluster.services[i.service].unit == unit]
    placed_on: Counter[str] = Counter()
    for inst in mine:
        if inst.node is not None and inst.service == service:
            placed_on[inst.node] += 1
    mine_keys = {i.key for i in mine}
    used_all, placed_all = _usage(cluster, members, ())
    used, placed = _usage(cluster, members, mine_keys)
    chosen = _scores(cluster, members, unit, placed_on, placed, used, options)
    reasons = explain_units(cluster, members, [unit], placed_all, used_all, options).get(unit, ())
    others = [r for r in reasons if r.target not in placed_on]
    placed_at, now = (), ()
    if placed_on:
        placed_at = _placed_at(cluster, service)
        now = _scores(cluster, members, unit, _replaced(cluster, service, mine_keys, options), placed, used,
                      options)
        if not any(i.node is None for i in mine):  # nothing pending: nodes were not passed over now
            others = [Reject(r.subject, r.target, Const("placed_earlier"), r.args)
                      if str(r.code) == "not_chosen" else r for r in others]
    unplaced = sum(1 for i in mine if i.node is None and i.service == service)
    blockers: tuple[str, ...] = ()
    if unplaced:
        blockers = blocking_facts(cluster, members, unit, placed_all, used_all, options)
    name = display_name(*service.split("/", 1))
    zones, short = _spread(cluster, unit, placed_on, reasons, used_all, unplaced)
    return Explanation(name, unit, chosen, tuple(summarize(others)), unplaced, blockers, zones, short,
                       placed_at, now)


def _placed_at(cluster: Cluster, service: str) -> tuple[tuple[str, int | None, int | None], ...]:
    """(node, revision, score) of the placement documents of `service`'s placed replicas."""
    seen: dict[tuple[str, object, object], None] = {}
    for inst in cluster.instances:
        if inst.service != service or inst.node is None:
            continue
        doc = cluster.existing.get(placement_key(inst.tenant, inst.name))
        doc = doc if isinstance(doc, dict) else {}
        seen[inst.node, doc.get("revision"), doc.get("score")] = None
    return tuple(sorted(seen, key=lambda t: (t[0], str(t[1]), str(t[2]))))


def _replaced(cluster: Cluster, service: str, mine: set[str], options: PlanOptions) -> Counter[str]:
    """Where `service`'s replicas would go if its unit were placed again now, everything else kept
    where it runs (other pending instances left aside): node → replicas."""
    instances = [dataclasses.replace(i, node=None) if i.key in mine else i
                 for i in cluster.instances if i.key in mine or i.node is not None]
    again = plan(Cluster(cluster.nodes, cluster.services, instances, cluster.revision, cluster.existing),
                 options)
    return Counter(node for i in instances if i.service == service
                   for node in (again.placements.get(i.key),) if node is not None)


#: reason codes of the static filter and readiness: such a node is not eligible at all
_INELIGIBLE = {"missing_label", "restricted", "wrong_zone", "wrong_architecture", "node_not_ready"}


def _spread(cluster: Cluster, unit, placed_on, reasons, used, unplaced):
    """Replicas per eligible zone of a spread unit and, by the arithmetic of spread.py, the zones
    that stay below the balanced share because their eligible nodes lack room."""
    services = [s for s in cluster.services.values() if s.unit == unit]
    if not any(s.spread for s in services):
        return (), ()
    cpu, mem = sum(s.cpu for s in services), sum(s.mem for s in services)
    out = {r.target for r in reasons if str(r.code) in _INELIGIBLE}
    room: dict[str, int] = defaultdict(int)
    for name, node in cluster.nodes.items():
        if node.zone is None or name in out:
            continue
        used_cpu, used_mem = used.get(name, (0, 0))
        fit = unplaced + 1
        if cpu:
            fit = min(fit, (node.cpu - used_cpu) // cpu)
        if mem:
            fit = min(fit, (node.mem - used_mem) // mem)
        room[node.zone] += max(fit, 0)
    counts: Counter[str] = Counter()
    for name, count in placed_on.items():
        if cluster.nodes.get(name) and cluster.nodes[name].zone is not None:
            counts[cluster.nodes[name].zone] += count
    zones = tuple((z, counts.get(z, 0)) for z in sorted(set(room) | set(counts)))
    if unplaced:  # where the pending replicas would go
        return zones, zone_quotas(unplaced, counts, room)[1]
    top = max((n for _, n in zones), default=0)
    return zones, tuple(ZoneShort(z, n, top, room.get(z, 0)) for z, n in zones if n < top - 1)


def _usage(cluster: Cluster, members, leave_out) -> tuple[dict, dict]:
    """Requests per node and replicas per (unit, node) of the placed instances not in `leave_out`."""
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    placed: dict[tuple[str, str], int] = defaultdict(int)
    for inst in cluster.instances:
        other = cluster.services.get(inst.service)
        if inst.node is None or inst.key in leave_out or other is None:
            continue
        used[inst.node][0] += inst.cpu
        used[inst.node][1] += inst.mem
        if members[other.unit][0] == inst.service:  # one count per group slot
            placed[other.unit, inst.node] += 1
    return used, placed


def _scores(cluster, members, unit, placed_on, placed, used, options) -> tuple[NodeScore, ...]:
    """The objective terms of the actual placement (`fixed` facts) of `unit`."""
    if not placed_on:
        return ()
    session = Session(load_program(PROGRAM, options.extensions), options.solve)
    usage = {n: (c, m) for n, (c, m) in used.items()}
    total = sum(placed_on.values())
    facts, _ = work_facts(cluster, members, {unit: total}, placed, usage,
                          nodes=node_facts(cluster.nodes, node_classes(cluster.nodes.values())))
    facts.extend(atom("fixed", unit, node, count) for node, count in sorted(placed_on.items()))
    session.add_facts(facts)
    session.ground([("base", ()), ("place", ())])
    result = session.solve(optimize=False)
    terms: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for cost in decode(result.atoms("cost", 5), Cost):
        if cost.target in placed_on and (cost.subject == unit or str(cost.subject) == "node"):
            terms[str(cost.target)].append((_criterion(cost.criterion), cost.amount))
    return tuple(NodeScore(n, placed_on[n], tuple(sorted(terms.get(n, ())))) for n in sorted(placed_on))
