"""Placement, all of it (rules/placement.lp ↔ engine/placement/): a snapshot's `Cluster` in, a
`Plan` (instance → node, reasons) out.

`plan(Cluster.from_snapshot(snapshot), PlanOptions())` is what the placement controller
(`controller.py`) and `cca plan` (`offline.py`) run; `explain_units` gives per-node reasons for any
unit, `explain.explain` the whole answer to "why here" (`reasons.py` words the codes, `unsat_core.py`
finds what blocks an unplaced unit). This package imports `engine.solve` (the clingo bridge), never
the other way round.
"""

from ccattler.engine.placement.candidates import CandidatePolicy
from ccattler.engine.placement.model import GROUP_PREFIX, Cluster, Instance, Node, Service
from ccattler.engine.placement.run import Assign, Cost, Plan, PlanOptions, explain_units, plan

__all__ = [
    "GROUP_PREFIX",
    "Assign",
    "CandidatePolicy",
    "Cluster",
    "Cost",
    "Instance",
    "Node",
    "Plan",
    "PlanOptions",
    "Service",
    "explain_units",
    "plan",
]
