"""The failure controller marks nodes down when their lease-bound facts vanish, ready when back."""

from __future__ import annotations

from controller_builders import World, node, placement

from ccattler.engine.controllers.failure import FailureController


def run(world: World):
    changes = FailureController().reconcile(world.snapshot(), now=0.0)
    world.apply(changes)
    return changes


def condition(world: World, name: str):
    doc = world.values.get(f"derived/node/{name}")
    return doc and doc["condition"]


def test_observed_nodes_are_ready_and_a_rerun_changes_nothing():
    world = World(node("n1"), node("n2"))
    run(world)
    assert condition(world, "n1") == condition(world, "n2") == "ready"
    assert world.values["derived/node/n1"]["since"] == 1
    assert not run(world)


def test_a_node_whose_lease_expired_with_placements_is_down_then_ready_when_back():
    world = World(node("n1"), node("n2"), placement("web-bcdfg", "n1"))
    run(world)
    world.delete("observed/node/n1")  # the lease expired
    changes = run(world)
    assert condition(world, "n1") == "down"
    assert world.values["derived/node/n1"]["since"] == world.revision - 1
    assert set(changes.puts) == {"derived/node/n1"}
    world.put(*node("n1"))  # the agent re-registered
    run(world)
    assert condition(world, "n1") == "ready"


def test_a_vanished_node_is_forgotten_once_nothing_refers_to_it():
    world = World(node("n1"), placement("web-bcdfg", "n1"))
    run(world)
    world.delete("observed/node/n1")
    run(world)
    assert condition(world, "n1") == "down"
    world.delete("derived/placement/default/web-bcdfg")  # re-placed elsewhere
    run(world)
    assert "derived/node/n1" not in world.values


def test_a_declared_node_without_an_agent_is_down():
    world = World(("desired/node/n9", {"zone": "a", "labels": {}, "restrictions": [], "architecture": None,
                                       "capacity": None}))
    run(world)
    assert condition(world, "n9") == "down"


def test_depends_on_guards_the_observed_node():
    assert FailureController().depends_on("derived/node/n1") == ("observed/node/n1", "intent/node/n1")
