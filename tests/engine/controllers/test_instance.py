"""The instance controller: stable ids, scaling both ways, stateful ordinals, spec changes, rollouts."""

from __future__ import annotations

import re

import pytest
from controller_builders import World, node, service

from ccattler.engine.controllers.instance import SPEC_FIELDS, InstanceController, instance_suffix, spec_hash
from ccattler.engine.facts import ServiceRef
from ccattler.engine.facts.snapshot import ChangeSet

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


DB = "derived/instance/default/db/"


def held(world: World, *names: str, node_name: str = "n1") -> None:
    """An agent on `node_name` reports these instances (it holds them until it has stopped them)."""
    world.put(*node(node_name))
    for name in names:
        world.put(f"observed/instance/default/{name}", {"node": node_name, "state": "running", "ip": None,
                                                        "restarts": 0, "reason": None, "health": None,
                                                        "ready": True})


def test_stateful_scale_down_stops_the_highest_ordinal_first_one_at_a_time():
    controller = InstanceController()
    world = World(service("db", instances=3, stateful=True))
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    held(world, "db-0", "db-1", "db-2")
    world.put(*service("db", instances=1, stateful=True))
    changes = controller.reconcile(world.snapshot(), 0.0)
    assert changes.deletes == {DB + "db-2"} and not changes.puts  # db-1 waits for db-2's agent
    world.apply(changes)
    assert not controller.reconcile(world.snapshot(), 0.0)  # db-2 is still being stopped
    assert controller.wakes_on("observed/instance/default/db-2")
    assert not controller.wakes_on("observed/instance/default/web-bcdfg")  # other reports: no wake
    world.delete("observed/instance/default/db-2")  # its agent stopped and removed it
    changes = controller.reconcile(world.snapshot(), 0.0)
    assert changes.deletes == {DB + "db-1"}
    world.apply(changes)
    assert names(world, DB) == ["db-0"] and not controller.reconcile(world.snapshot(), 0.0)
    assert not controller.wakes_on("observed/instance/default/db-1")  # nothing pending any more


def test_stateful_scale_to_zero_goes_down_one_ordinal_per_stop():
    controller = InstanceController()
    world = World(service("db", instances=3, stateful=True))
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    held(world, "db-0", "db-1", "db-2")
    world.put(*service("db", instances=0, stateful=True))
    for name in ("db-2", "db-1", "db-0"):
        changes = controller.reconcile(world.snapshot(), 0.0)
        assert changes.deletes == {DB + name}
        world.apply(changes)
        assert not controller.reconcile(world.snapshot(), 0.0)
        world.delete(f"observed/instance/default/{name}")
    assert names(world, DB) == []


def test_ordinals_no_agent_holds_go_together_down_to_the_first_held_one():
    controller = InstanceController()
    world = World(service("db", instances=4, stateful=True))
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    held(world, "db-0", "db-1")  # db-2 and db-3 never started (ordered start: db-1 never got ready)
    world.put(*service("db", instances=0, stateful=True))
    changes = controller.reconcile(world.snapshot(), 0.0)
    assert changes.deletes == {DB + "db-3", DB + "db-2", DB + "db-1"}  # db-0 waits for db-1


def test_a_report_from_a_node_that_is_gone_holds_nothing_up():
    controller = InstanceController()
    world = World(service("db", instances=2, stateful=True))
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    held(world, "db-0", "db-1")
    world.put(*service("db", instances=1, stateful=True))
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    world.put(*service("db", instances=0, stateful=True))
    assert not controller.reconcile(world.snapshot(), 0.0)  # db-1 is still reported by n1
    assert controller.wakes_on("observed/node/n1")
    world.delete("observed/node/n1")  # n1's lease expired: its report is stale
    assert controller.reconcile(world.snapshot(), 0.0).deletes == {DB + "db-0"}


def test_scaling_back_up_while_an_ordinal_stops_keeps_the_rest():
    controller = InstanceController()
    world = World(service("db", instances=3, stateful=True))
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    held(world, "db-0", "db-1", "db-2")
    world.put(*service("db", instances=1, stateful=True))
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    world.put(*service("db", instances=2, stateful=True))
    assert not controller.reconcile(world.snapshot(), 0.0)  # db-1 is within the count again
    world.put(*service("db", instances=3, stateful=True))
    assert set(controller.reconcile(world.snapshot(), 0.0).puts) == {DB + "db-2"}


def test_deleting_a_stateful_service_removes_every_ordinal_at_once():
    world = World(service("db", instances=3, stateful=True))
    run(world)
    held(world, "db-0", "db-1", "db-2")
    world.delete("desired/service/default/db")
    assert run(world).deletes == {DB + "db-0", DB + "db-1", DB + "db-2"}  # like a StatefulSet's deletion


def test_stateless_services_ignore_agent_reports():
    controller = InstanceController()
    world = World(service(instances=2))
    world.apply(controller.reconcile(world.snapshot(), 0.0))
    held(world, *names(world))
    assert not controller.reconcile(world.snapshot(), 0.0)
    assert not any(controller.wakes_on(f"observed/instance/default/{n}") for n in names(world))
    world.put(*service(instances=1))
    assert len(controller.reconcile(world.snapshot(), 0.0).deletes) == 1  # no ordering for stateless


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
    # A rollout document about another spec is stale (the rollout controller has not seen the
    # change yet): the instances are held as they are, never all replaced at once meanwhile.
    before = dict(world.under(PREFIX))
    world.put("derived/rollout/default/web", {"spec": "0123", "counts": {old_spec: 3}})
    run(world)
    assert dict(world.under(PREFIX)) == before
    # Without any rollout document (no rollout controller) the service's own count wins.
    world.delete("derived/rollout/default/web")
    run(world)
    assert [doc["spec"] for doc in world.under(PREFIX).values()] == [new_spec] * 3


def test_a_rollout_drops_the_instances_it_names_first():
    world = World(service(instances=3))
    run(world)
    old_spec = spec_hash(service()[1])
    newest = names(world)[-1]
    first = sorted(names(world))[0]
    new_service = service(instances=3, image="busybox:2")
    new_spec = spec_hash(new_service[1])
    world.put(*new_service)
    world.put("derived/rollout/default/web", {"spec": new_spec, "counts": {old_spec: 2, new_spec: 1},
                                              "drop": [first]})
    run(world)
    assert first not in names(world) and newest in names(world)


def test_a_rolled_back_document_builds_instances_of_the_previous_spec_from_its_fields():
    old_service = service(instances=2)
    world = World(old_service)
    run(world)
    old_spec = spec_hash(old_service[1])
    old = sorted(names(world))
    fields = {f: old_service[1].get(f) for f in SPEC_FIELDS}
    bad = service(instances=2, image="busybox:bad")
    bad_spec = spec_hash(bad[1])
    world.put(*bad)
    world.put("derived/rollout/default/web", {"spec": bad_spec, "counts": {old_spec: 1, bad_spec: 2}})
    run(world)
    assert sorted(d["spec"] for d in world.under(PREFIX).values()) == sorted([old_spec, bad_spec, bad_spec])
    # Rolled back: the bad spec to 0, the previous one to 2 — re-created under its own names.
    world.put("derived/rollout/default/web", {"spec": bad_spec, "build": old_spec,
                                              "counts": {old_spec: 2, bad_spec: 0},
                                              "fields": {old_spec: fields}})
    run(world)
    docs = list(world.under(PREFIX).values())
    assert [d["spec"] for d in docs] == [old_spec] * 2 and sorted(names(world)) == old
    assert {d["image"] for d in docs} == {old_service[1]["image"]}


def test_a_rolled_back_stateful_service_rewrites_its_ordinals_to_the_previous_spec():
    old_service = service(instances=2, stateful=True)
    world = World(old_service)
    run(world)
    old_spec = spec_hash(old_service[1])
    fields = {f: old_service[1].get(f) for f in SPEC_FIELDS}
    bad = service(instances=2, stateful=True, image="busybox:bad")
    bad_spec = spec_hash(bad[1])
    world.put(*bad)
    world.put("derived/rollout/default/web", {"spec": bad_spec, "counts": {old_spec: 1, bad_spec: 2}})
    run(world)
    assert [d["spec"] for d in world.under(PREFIX).values()] == [old_spec, bad_spec]  # web-1 first
    world.put("derived/rollout/default/web", {"spec": bad_spec, "build": old_spec,
                                              "counts": {old_spec: 2, bad_spec: 0},
                                              "fields": {old_spec: fields}})
    run(world)
    assert [d["spec"] for d in world.under(PREFIX).values()] == [old_spec, old_spec]


def test_depends_on_names_the_service_and_its_rollout():
    deps = InstanceController().depends_on("derived/instance/payments/checkout/checkout-bcdfg")
    assert deps == ("desired/service/payments/checkout", "derived/rollout/payments/checkout",
                    "derived/disruption/payments/checkout")


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
