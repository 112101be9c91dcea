"""What every round of one plan shares, in one object: the round's inputs that run.py hands to
candidates.py and facts.py (the cluster, its units and their needs, the node classes and their
facts, the loaded program, the options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clingo import Symbol

from ccattler.engine.placement.model import Cluster

if TYPE_CHECKING:
    from ccattler.engine.placement.candidates import UnitNeed
    from ccattler.engine.placement.run import PlanOptions


@dataclass(frozen=True, slots=True)
class PlanContext:
    cluster: Cluster
    members: Mapping[str, list[str]]  # unit → its member services
    needs: Mapping[str, UnitNeed]  # unit → what it asks of a node
    classes: Mapping[str, str]  # node → its class representative
    nodes: list[Symbol]  # the node facts (the same every round)
    program: Any  # the loaded placement program (engine.solve.program)
    options: PlanOptions
