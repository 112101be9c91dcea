"""The default controller set: order, disjoint write domains, and configuration passed through."""

from __future__ import annotations

from ccattler.engine.controllers.registry import ControllerConfig, default_controllers
from ccattler.engine.facts import owner_of


def test_order_and_one_writer_per_prefix():
    controllers = default_controllers()
    assert [c.name for c in controllers] == ["autoscaler", "rollout", "instance", "failure", "disruption",
                                             "placement", "network", "endpoint", "netpolicy"]
    prefixes = [p for c in controllers for p in c.writes]
    assert len(prefixes) == len(set(prefixes))
    for controller in controllers:
        for prefix in controller.writes:
            assert owner_of(prefix + "x") in (f"{controller.name}-controller", controller.name)


def test_configuration_reaches_the_network_controller():
    controllers = default_controllers(ControllerConfig(cluster_cidr="10.64.0.0/12", node_prefix=26))
    network = next(c for c in controllers if c.name == "network")
    assert str(network.cluster) == "10.64.0.0/12" and network.node_prefix == 26
