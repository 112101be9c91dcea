"""Live `explain` and `plan`: the logic engineer's explain and settle libraries run over a snapshot of
the live store (plan overlays the files' compiled facts on it first); nothing is written."""

from __future__ import annotations

from typing import Any

from ccattler.dsl import Reader, Source, compile_sources
from ccattler.engine.autoscale.explain import scaling_json, scaling_lines
from ccattler.engine.disruption.explain import moves_lines, moves_of
from ccattler.engine.facts import DEFAULT_TENANT
from ccattler.engine.facts.keys import REBALANCE, SCALE
from ccattler.engine.placement.explain import explain
from ccattler.engine.placement.offline import PLAN_PREFIXES, PlanReport, simulate
from ccattler.engine.runner.snapshot import read_snapshot
from ccattler.engine.store import Store


def explain_live(store: Store, target: str) -> dict[str, Any]:
    """Why the target service (or an instance's service) runs where it does, on live state."""
    answer = explain(read_snapshot(store, PLAN_PREFIXES), target)
    out = {"explanation": answer.to_json(), "lines": answer.lines()}
    full = answer.service if "/" in answer.service else f"{DEFAULT_TENANT}/{answer.service}"
    fact = store.get(SCALE + full)
    if fact is not None and isinstance(fact.value, dict):  # the autoscaler's decision and why
        out["explanation"]["scaling"] = scaling_json(fact.value)
        out["lines"] += scaling_lines(fact.value)
    rebalance = store.get(REBALANCE)
    moved = moves_of(rebalance.value if rebalance is not None else None, full)
    if moved is not None:  # instances the rebalancer moved, and what each move gained
        out["explanation"]["rebalancing"] = moved
        out["lines"] += moves_lines(moved)
    return out


def plan_live(store: Store, sources: list[Source], tenant: str, reader: Reader) -> dict[str, Any]:
    """Where everything would run if `sources` were applied now (existing placements stay facts)."""
    live = read_snapshot(store, PLAN_PREFIXES)
    compiled = compile_sources(sources, tenant, reader)
    snapshot = simulate({**live.values, **compiled})
    report = PlanReport.from_snapshot(snapshot)
    return report.to_json() | {"nodes": report.nodes, "revision": live.revision}
