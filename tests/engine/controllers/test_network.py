"""Address allocation: a stable subnet per node, a stable address per placed instance."""

from __future__ import annotations

import ipaddress

import pytest
from controller_builders import World, node, placement

from ccattler.engine.controllers.network import InvalidNetworkConfig, NetworkController


def run(world: World, controller: NetworkController | None = None):
    changes = (controller or NetworkController()).reconcile(world.snapshot(), now=0.0)
    world.apply(changes)
    return changes


def subnet(world: World, name: str) -> str | None:
    doc = world.values.get(f"derived/network/subnet/{name}")
    return doc and doc["subnet"]


def ip(world: World, instance: str) -> dict | None:
    return world.values.get(f"derived/network/ip/default/{instance}")


def test_each_node_gets_its_own_24_and_instances_addresses_in_it():
    world = World(node("n1"), node("n2"), placement("web-a", "n1"), placement("web-b", "n1"),
                  placement("web-c", "n2"))
    run(world)
    assert subnet(world, "n1") == "10.88.0.0/24" and subnet(world, "n2") == "10.88.1.0/24"
    assert world.values["derived/network/subnet/n1"]["gateway"] == "10.88.0.1"
    assert ip(world, "web-a") == {"instance": "web-a", "service": "default/web", "node": "n1",
                                  "ip": "10.88.0.2", "prefix": 24, "gateway": "10.88.0.1"}
    assert ip(world, "web-b")["ip"] == "10.88.0.3"
    assert ip(world, "web-c")["ip"] == "10.88.1.2"
    assert not run(world)


def test_addresses_stay_while_instances_stay_and_follow_a_move():
    world = World(node("n1"), node("n2"), placement("web-a", "n1"), placement("web-b", "n1"))
    run(world)
    world.delete("derived/placement/default/web-a")
    world.put(*placement("web-z", "n1"))  # sorts after web-b, but takes the lowest free address
    run(world)
    assert ip(world, "web-a") is None
    assert ip(world, "web-b")["ip"] == "10.88.0.3"
    assert ip(world, "web-z")["ip"] == "10.88.0.2"
    world.put(*placement("web-b", "n2"))
    run(world)
    assert ip(world, "web-b")["ip"] == "10.88.1.2" and ip(world, "web-b")["node"] == "n2"


def test_subnets_are_stable_and_freed_when_the_node_is_gone():
    world = World(node("b"), node("c"))
    run(world)
    assert subnet(world, "c") == "10.88.1.0/24"
    world.put(*node("a"))  # a new node sorting first does not renumber the others
    run(world)
    assert subnet(world, "a") == "10.88.2.0/24" and subnet(world, "c") == "10.88.1.0/24"
    world.delete("observed/node/b")
    run(world)
    assert subnet(world, "b") is None
    world.put(*node("d"))
    run(world)
    assert subnet(world, "d") == "10.88.0.0/24"  # the freed subnet is reused


def test_a_down_node_keeps_its_subnet_while_it_still_has_a_condition():
    world = World(node("n1"), ("derived/node/n1", {"condition": "ready", "since": 1}))
    run(world)
    world.delete("observed/node/n1")
    world.put("derived/node/n1", {"condition": "down", "since": 3})
    run(world)
    assert subnet(world, "n1") == "10.88.0.0/24"


def test_exhaustion_leaves_nodes_and_instances_without_addresses():
    controller = NetworkController("10.9.0.0/23", 24)
    world = World(node("a"), node("b"), node("c"), placement("web-x", "c"))
    run(world, controller)
    assert subnet(world, "a") and subnet(world, "b") and subnet(world, "c") is None
    assert ip(world, "web-x") is None
    small = NetworkController("10.9.0.0/24", 30)  # 1 usable address per node
    world = World(node("a"), placement("web-x", "a"), placement("web-y", "a"))
    run(world, small)
    assert ip(world, "web-x")["ip"] == "10.9.0.2" and ip(world, "web-y") is None


def test_foreign_or_duplicate_documents_are_repaired():
    world = World(node("n1"), node("n2"), placement("web-a", "n1"), placement("web-b", "n1"))
    world.put("derived/network/subnet/n1", {"node": "n1", "subnet": "192.168.0.0/24", "gateway": "x"})
    world.put("derived/network/ip/default/web-a", {"ip": "10.88.0.9", "node": "n1"})
    world.put("derived/network/ip/default/web-b", {"ip": "10.88.0.9", "node": "n1"})
    run(world)
    assert ipaddress.IPv4Network(subnet(world, "n1")).subnet_of(ipaddress.IPv4Network("10.88.0.0/16"))
    assert ip(world, "web-a")["ip"] != ip(world, "web-b")["ip"]
    assert not run(world)


@pytest.mark.parametrize("cidr, prefix", [("nonsense", 24), ("10.0.0.0/24", 16), ("10.0.0.0/16", 31)])
def test_bad_configuration_is_a_clear_error(cidr, prefix):
    with pytest.raises(InvalidNetworkConfig):
        NetworkController(cidr, prefix)
