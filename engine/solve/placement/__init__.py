"""The driver of rules/placement.lp: a snapshot's `Cluster` in, a `Plan` (instance → node, reasons) out.

`plan(Cluster.from_snapshot(snapshot), PlanOptions())` is what the placement controller and
`cca plan` run; `explain_units` gives per-node reasons for any unit.
"""

from ccattler.engine.solve.placement.candidates import CandidatePolicy
from ccattler.engine.solve.placement.model import GROUP_PREFIX, Cluster, Instance, Node, Service
from ccattler.engine.solve.placement.run import Assign, Cost, Plan, PlanOptions, explain_units, plan

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
