"""The instance controller: stable ids, scaling both ways, stateful ordinals, spec changes, rollouts."""

from __future__ import annotations

import re

import pytest
from controller_builders import World, service

from ccattler.engine.controllers.base import ChangeSet
from ccattler.engine.controllers.instance import InstanceController, instance_suffix, spec_hash
from ccattler.engine.facts import ServiceRef

PREFIX = "derived/instance/default/web/"


def run(world: World) -> ChangeSet:
    changes = InstanceController().reconcile(world.snapshot(), now=0.0)
    world.apply(changes)
    return changes


def names(world: World, prefix: str = PREFIX) -> list[str]:
    return sorted(k[len(prefix):] for k in world.under(prefix))


def test_creates_stateless_instances_with_short_deterministic_suffixes():
    world = World(service(instances=3))
    run(world)
    created = names(world)
    assert len(created) == 3
    assert all(re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]{5}", n) for n in created)
    doc = world.values[PREFIX + created[0]]
    assert doc == {"service": "default/web", "name": created[0], "ordinal": None,
                   "spec": doc["spec"], "image": "busybox", "resources": {"cpu": 100, "memory": 64 << 20}}
    # The same snapshot in another world gives the same names: no randomness.
    again = World(service(instances=3))
    run(again)
    assert names(again) == created


def test_a_second_run_changes_nothing():
    world = World(service(instances=4), service("db", instances=2, stateful=True))
    assert run(world)
    assert not run(world)


def test_scale_up_keeps_existing_and_adds():
    world = World(service(instances=2))
    run(world)
    before = set(names(world))
    world.put(*service(instances=5))
    changes = run(world)
    assert before < set(names(world)) and len(names(world)) == 5
    assert not changes.deletes


def test_scale_down_removes_newest_first():
    world = World(service(instances=2))
    run(world)
    first = set(names(world))
    world.put(*service(instances=4))
    run(world)
    world.put(*service(instances=2))
    changes = run(world)
    assert set(names(world)) == first
    assert len(changes.deletes) == 2 and not changes.puts


def test_scale_down_then_up_reuses_the_freed_names():
    world = World(service(instances=3))
    run(world)
    three = names(world)
    world.put(*service(instances=1))
    run(world)
    world.put(*service(instances=3))
    run(world)
    assert names(world) == three


def test_stateful_services_get_ordinals_and_scale_from_the_top():
    world = World(service("db", instances=3, stateful=True))
    run(world)
    prefix = "derived/instance/default/db/"
    assert names(world, prefix) == ["db-0", "db-1", "db-2"]
    assert world.values[prefix + "db-1"]["ordinal"] == 1
    world.put(*service("db", instances=1, stateful=True))
    changes = run(world)
    assert names(world, prefix) == ["db-0"]
    assert changes.deletes == {prefix + "db-1", prefix + "db-2"}


def test_stateful_spec_change_updates_in_place():
    world = World(service("db", instances=2, stateful=True))
    run(world)
    world.put(*service("db", instances=2, stateful=True, image="busybox:2"))
    changes = run(world)
    prefix = "derived/instance/default/db/"
    assert set(changes.puts) == {prefix + "db-0", prefix + "db-1"} and not changes.deletes
    assert world.values[prefix + "db-0"]["image"] == "busybox:2"


def test_stateless_spec_change_replaces_each_instance_in_a_group():
    world = World(service(instances=2))
    run(world)
    old = set(names(world))
    world.put(*service(instances=2, env={"A": "1"}))
    changes = run(world)
    new = set(names(world))
    assert not old & new and len(new) == 2
    assert len(changes.groups) == 2
    for group in changes.groups:
        assert len(group & changes.deletes) == 1 and len(group & changes.puts.keys()) == 1


@pytest.mark.parametrize(
    "field, value, replaces",
    [
        pytest.param("image", "busybox:2", True, id="image"),
        pytest.param("command", ["httpd", "-f"], True, id="command"),
        pytest.param("env", {"X": "1"}, True, id="env"),
        pytest.param("resources", {"cpu": 200, "memory": 1}, True, id="resources"),
        pytest.param("tags", {"team": "x"}, False, id="tags"),
        pytest.param("expose", [{"port": 80, "protocol": "tcp", "external": False}], False, id="expose"),
        pytest.param("placement", {"require": [{"key": "a", "value": "b"}]}, False, id="placement"),
    ],
)
def test_which_fields_need_new_containers(field, value, replaces):
    base = service()[1]
    assert (spec_hash(base) != spec_hash({**base, field: value})) is replaces


def test_deleting_a_service_removes_its_instances_only():
    world = World(service(instances=2), service("api", instances=1))
    run(world)
    world.delete("desired/service/default/web")
    run(world)
    assert names(world) == []
    assert len(names(world, "derived/instance/default/api/")) == 1


def test_tenants_are_part_of_keys_and_names():
    world = World(service("checkout", tenant="payments", instances=1), service("checkout", instances=1))
    run(world)
    [paid] = names(world, "derived/instance/payments/checkout/")
    [free] = names(world, "derived/instance/default/checkout/")
    assert paid != free
    assert world.values[f"derived/instance/payments/checkout/{paid}"]["service"] == "payments/checkout"


def test_suffix_collisions_move_to_the_next_slot():
    ref = ServiceRef("default", "web")
    spec = spec_hash(service()[1])
    taken = f"web-{instance_suffix(ref, spec, 0)}"
    # An unrelated document squats the slot-0 name with another spec: the controller must not reuse it.
    world = World(service(instances=1))
    world.put(PREFIX + taken, {"service": "default/web", "name": taken, "ordinal": None, "spec": "other",
                               "image": "x", "resources": {"cpu": 0, "memory": 0}})
    changes = run(world)
    assert PREFIX + taken in changes.deletes
    assert names(world) == [f"web-{instance_suffix(ref, spec, 1)}"]


def test_zero_instances_and_stateful_flip():
    world = World(service(instances=2))
    run(world)
    world.put(*service(instances=0))
    run(world)
    assert names(world) == []
    world.put(*service(instances=2, stateful=True))
    run(world)
    assert names(world) == ["web-0", "web-1"]
    world.put(*service(instances=1))
    run(world)
    assert len(names(world)) == 1 and names(world)[0] != "web-0"


def test_a_rollout_document_keeps_old_instances_while_the_new_spec_comes_up():
    world = World(service(instances=3))
    run(world)
    old_spec = spec_hash(service()[1])
    old = set(names(world))
    new_service = service(instances=3, image="busybox:2")
    new_spec = spec_hash(new_service[1])
    world.put(*new_service)
    world.put("derived/rollout/default/web", {"spec": new_spec, "counts": {old_spec: 2, new_spec: 2}})
    run(world)
    specs = sorted(doc["spec"] for doc in world.under(PREFIX).values())
    assert specs.count(old_spec) == 2 and specs.count(new_spec) == 2
    assert len(old & set(names(world))) == 2
    # A rollout document about another spec is stale: the service's own count wins.
    world.put("derived/rollout/default/web", {"spec": "0123", "counts": {old_spec: 3}})
    run(world)
    assert [doc["spec"] for doc in world.under(PREFIX).values()] == [new_spec] * 3


def test_depends_on_names_the_service_and_its_rollout():
    deps = InstanceController().depends_on("derived/instance/payments/checkout/checkout-bcdfg")
    assert deps == ("desired/service/payments/checkout", "derived/rollout/payments/checkout")


@pytest.mark.parametrize("bad", ["3", -1, None, 2.5, True])
def test_a_malformed_replica_count_leaves_the_service_alone(bad):
    world = World(service(instances=2), service("api", instances=1))
    run(world)
    before = names(world)
    world.put(*service(instances=bad))
    world.put(*service("api", instances=2))
    run(world)
    assert names(world) == before  # untouched, not deleted
    assert len(names(world, "derived/instance/default/api/")) == 2  # the others go on
