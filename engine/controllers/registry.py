"""The controllers the server's runner (and `cca plan`'s settle) runs, in the order they run.

Order matters for settling quickly: instances exist before they are placed, node conditions are
known before placement avoids down nodes, and addresses follow placements. The knobs are
`ControllerConfig`'s fields (cluster CIDR, per-node prefix, service CIDR, placement options).
"""

from __future__ import annotations

from dataclasses import dataclass

from ccattler.engine.controllers.base import Controller
from ccattler.engine.controllers.endpoint import EndpointController
from ccattler.engine.controllers.failure import FailureController
from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.controllers.network import DEFAULT_CLUSTER_CIDR, DEFAULT_NODE_PREFIX, NetworkController
from ccattler.engine.controllers.placement import PlacementController
from ccattler.engine.controllers.vip import DEFAULT_SERVICE_CIDR
from ccattler.engine.solve.placement.run import PlanOptions


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Settings of the default controller set."""

    cluster_cidr: str = DEFAULT_CLUSTER_CIDR
    node_prefix: int = DEFAULT_NODE_PREFIX
    service_cidr: str = DEFAULT_SERVICE_CIDR
    placement: PlanOptions | None = None


def default_controllers(config: ControllerConfig | None = None) -> list[Controller]:
    """Instance → failure → placement → network → endpoint: what `cca server` and `cca up` run."""
    config = config or ControllerConfig()
    return [
        InstanceController(),
        FailureController(),
        PlacementController(config.placement),
        NetworkController(config.cluster_cidr, config.node_prefix, config.service_cidr),
        EndpointController(),
    ]

