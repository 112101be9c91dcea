"""The controllers the server's runner (and `cca plan`'s settle) runs, in the order they run.

Order matters for settling quickly: the rollout controller has seen a spec change before the
instance controller applies it (meanwhile a stale rollout document holds the instances), instances
exist before they are placed, node conditions are
known before placement avoids down nodes (and before the disruption controller drains them; its
moves reach placement in the same round), and addresses follow placements. The knobs are
`ControllerConfig`'s fields (cluster CIDR, per-node prefix, service CIDR, placement options).
"""

from __future__ import annotations

from dataclasses import dataclass

from ccattler.engine.controllers.autoscale import AutoscaleController
from ccattler.engine.controllers.endpoint import EndpointController
from ccattler.engine.controllers.failure import FailureController
from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.controllers.network import DEFAULT_CLUSTER_CIDR, DEFAULT_NODE_PREFIX, NetworkController
from ccattler.engine.controllers.vip import DEFAULT_SERVICE_CIDR
from ccattler.engine.disruption.controller import DisruptionController
from ccattler.engine.disruption.rebalance import RebalanceOptions
from ccattler.engine.facts.snapshot import Controller
from ccattler.engine.netpolicy.controller import NetpolicyController
from ccattler.engine.placement.controller import PlacementController
from ccattler.engine.placement.run import PlanOptions
from ccattler.engine.rollout.controller import RolloutController


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Settings of the default controller set."""

    cluster_cidr: str = DEFAULT_CLUSTER_CIDR
    node_prefix: int = DEFAULT_NODE_PREFIX
    service_cidr: str = DEFAULT_SERVICE_CIDR
    placement: PlanOptions | None = None
    time_zone: str = "UTC"  # the cluster's: schedule windows of `scale` blocks
    rebalance: RebalanceOptions | None = None


def default_controllers(config: ControllerConfig | None = None) -> list[Controller]:
    """Autoscaler → rollout → instance → failure → disruption → placement → network → endpoint →
    netpolicy: what `cca server` and `cca up` run."""
    config = config or ControllerConfig()
    return [
        AutoscaleController(config.time_zone),
        RolloutController(),
        InstanceController(),
        FailureController(),
        DisruptionController(config.rebalance),
        PlacementController(config.placement),
        NetworkController(config.cluster_cidr, config.node_prefix, config.service_cidr),
        EndpointController(),
        NetpolicyController(),
    ]

