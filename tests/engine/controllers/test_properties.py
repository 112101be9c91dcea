"""Properties of the Python controllers over random histories (hypothesis): each run reaches the
fixed point in one step, counts match, names and addresses are unique and stable."""

from __future__ import annotations

import ipaddress

from controller_builders import World, node, placement, service
from hypothesis import given, settings
from hypothesis import strategies as st

from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.controllers.network import NetworkController

SERVICES = ["web", "api", "db"]

# One step: set a service's count (0-6), flip stateful, change its image, or delete it.
steps = st.lists(
    st.tuples(st.sampled_from(SERVICES), st.integers(0, 6), st.booleans(), st.sampled_from(["a", "b"]),
              st.booleans()),
    min_size=1, max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_instances_follow_any_history(history):
    controller = InstanceController()
    world = World()
    for name, count, stateful, image, delete in history:
        before = {k: v for k, v in world.values.items() if k.startswith(f"derived/instance/default/{name}/")}
        if delete:
            world.delete(f"desired/service/default/{name}")
        else:
            world.put(*service(name, instances=count, stateful=stateful, image=image))
        changes = controller.reconcile(world.snapshot(), 0.0)
        assert changes == InstanceController().reconcile(world.snapshot(), 0.0)  # the memo changes nothing
        world.apply(changes)
        assert not controller.reconcile(world.snapshot(), 0.0)  # one step reaches the fixed point
        docs = {k: v for k, v in world.values.items() if k.startswith(f"derived/instance/default/{name}/")}
        assert len(docs) == (0 if delete else count)
        names = [doc["name"] for doc in docs.values()]
        assert all(key.endswith("/" + doc["name"]) for key, doc in docs.items())
        if not delete and stateful:
            assert sorted(names) == sorted(f"{name}-{i}" for i in range(count))
        elif not delete:
            unchanged = {k for k, v in before.items() if v.get("ordinal") is None and v["image"] == image}
            kept = unchanged & docs.keys()
            assert len(kept) == min(len(unchanged), count)  # nothing replaced without a reason
    # The same final snapshot from scratch gives the same names.
    fresh = World(*((k, v) for k, v in world.values.items() if k.startswith("desired/")))
    fresh.apply(InstanceController().reconcile(fresh.snapshot(), 0.0))
    for name in SERVICES:
        prefix = f"derived/instance/default/{name}/"
        ours = {k for k in world.values if k.startswith(prefix)}
        theirs = {k for k in fresh.values if k.startswith(prefix)}
        assert len(ours) == len(theirs)


# One step: scale db to a count (0-5), or an agent on n1 takes up / lets go of ordinal db-<i>.
ordered = st.lists(
    st.one_of(st.tuples(st.just("scale"), st.integers(0, 5)),
              st.tuples(st.sampled_from(["hold", "release"]), st.integers(0, 6))),
    min_size=1, max_size=20,
)


@settings(max_examples=100, deadline=None)
@given(ordered)
def test_stateful_ordinals_stop_in_order_under_any_agent_reports(history):
    controller = InstanceController()
    world = World(node("n1"))
    prefix, observed = "derived/instance/default/db/", "observed/instance/default/db-"
    for action, value in history:
        if action == "scale":
            world.put(*service("db", instances=value, stateful=True))
        elif action == "hold" and prefix + f"db-{value}" in world.values:  # agents hold what is placed
            world.put(f"{observed}{value}", {"node": "n1", "state": "running"})
        elif action == "release":
            world.delete(f"{observed}{value}")
        changes = controller.reconcile(world.snapshot(), 0.0)
        assert changes == InstanceController().reconcile(world.snapshot(), 0.0)  # the memo changes nothing
        reports = {int(k[len(observed):]) for k in world.values if k.startswith(observed)}
        for key in changes.deletes:  # nothing goes while a higher ordinal stays or is still held
            ordinal = int(key.rsplit("-", 1)[1])
            assert not any(o > ordinal for o in reports)
            assert all(k in changes.deletes for k in world.values if k.startswith(prefix)
                       and int(k.rsplit("-", 1)[1]) > ordinal)
        world.apply(changes)
    db = world.values.get("desired/service/default/db")
    for key in [k for k in world.values if k.startswith(observed)]:  # every agent lets go: one step settles
        world.delete(key)
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    assert not controller.reconcile(world.snapshot(), 0.0)
    assert sorted(world.under(prefix)) == [f"{prefix}db-{i}" for i in range(db["instances"] if db else 0)]


# One step: place instance web-<i> on a node, or unplace it (None).
moves = st.lists(
    st.tuples(st.integers(0, 11), st.sampled_from(["n1", "n2", "n3", None])), min_size=1, max_size=25
)


@settings(max_examples=150, deadline=None)
@given(moves, st.sets(st.sampled_from(["n1", "n2", "n3"])))
def test_addresses_are_unique_stable_and_inside_their_node_subnet(history, gone):
    controller = NetworkController("10.88.0.0/16", 28)  # 13 addresses per node: exhaustion happens
    world = World(node("n1"), node("n2"), node("n3"))
    for index, target in history:
        name = f"web-{index}"
        before = world.values.get(f"derived/network/ip/default/{name}")
        if target is None:
            world.delete(f"derived/placement/default/{name}")
        else:
            world.put(*placement(name, target))
        changes = controller.reconcile(world.snapshot(), 0.0)
        assert changes == NetworkController("10.88.0.0/16", 28).reconcile(world.snapshot(), 0.0)  # memo
        world.apply(changes)
        assert not controller.reconcile(world.snapshot(), 0.0)
        ips = {k: v for k, v in world.values.items() if k.startswith("derived/network/ip/")}
        assert len({v["ip"] for v in ips.values()}) == len(ips)
        subnets = {v["node"]: ipaddress.IPv4Network(v["subnet"])
                   for k, v in world.values.items() if k.startswith("derived/network/subnet/")}
        assert len(set(subnets.values())) == len(subnets)
        for doc in ips.values():
            assert ipaddress.IPv4Address(doc["ip"]) in subnets[doc["node"]]
            placed = world.values[f"derived/placement/default/{doc['instance']}"]
            assert placed["node"] == doc["node"]
        if before and target == before["node"]:  # placed again on the same node: same address
            assert world.values.get(f"derived/network/ip/default/{name}") == before
    for name in gone:
        world.delete(f"observed/node/{name}")
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    assert not controller.reconcile(world.snapshot(), 0.0)
