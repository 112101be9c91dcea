"""Explain placement: reasons in English, filtered nodes by reason, score breakdowns, unsat cores.

Live use: `explain(snapshot, "payments/checkout")` with a snapshot of
`PlacementController.reads` (nodes, services, instances, placements); `render`/`describe` word the
reason records stored in unplaced `derived/placement` documents. Offline (`cca plan`):
`offline.simulate(facts)` then `offline.PlanReport.from_snapshot(snapshot)`.
"""

from ccattler.engine.explain.placement import Explanation, NodeScore, UnknownTarget, explain, resolve
from ccattler.engine.explain.reasons import KNOWN_CODES, describe, render, summarize

__all__ = [
    "KNOWN_CODES",
    "Explanation",
    "NodeScore",
    "UnknownTarget",
    "describe",
    "explain",
    "render",
    "resolve",
    "summarize",
]
