"""Seats of `share network` groups (agent/sandboxes.py) without a kernel: pairing, stickiness,
start/stop together, refusals, shared volume mounts."""

from __future__ import annotations

from pathlib import Path

from ccattler.agent.desired import desired_instances
from ccattler.agent.node import NodeCore
from ccattler.agent.runtime.process import ProcessRuntime
from ccattler.agent.sandboxes import Sandboxes
from tests.agent.group_slice import group_slice, without

SUBNET = "10.77.0.0/24"


def members(**names: list[str]) -> dict:
    return {svc: ("sleep 30", 8000 + i, insts) for i, (svc, insts) in enumerate(names.items())}


def test_replica_k_of_each_member_shares_one_seat_and_address(tmp_path: Path) -> None:
    facts = group_slice("n1", SUBNET, members(a=["a-x1", "a-x2"], b=["b-y1", "b-y2"]))
    arranged = Sandboxes("runc", tmp_path).arrange(desired_instances(facts, "n1"), facts)
    assert arranged.held == {}
    run = arranged.run
    assert run["default/a-x1"].sandbox == run["default/b-y1"].sandbox == "group:default/g#0"
    assert run["default/a-x2"].sandbox == run["default/b-y2"].sandbox == "group:default/g#1"
    assert run["default/a-x1"].ip == run["default/b-y1"].ip == "10.77.0.2"  # the first member's address
    assert run["default/b-y2"].ip == "10.77.0.3"


def test_seats_are_sticky_and_remembered_across_restarts(tmp_path: Path) -> None:
    facts = group_slice("n1", SUBNET, members(a=["a-x1", "a-x2"], b=["b-y1", "b-y2"]))
    Sandboxes("runc", tmp_path).arrange(desired_instances(facts, "n1"), facts)
    # a-x1 is replaced by a-x0, which sorts first: it takes the seat a-x1 left, not seat 0 of a-x2
    replaced = without(facts, "a-x1")
    replaced.update({k.replace("a-x2", "a-x0"): ({**v, "instance": "a-x0"} if "instance" in v else v)
                     for k, v in facts.items() if k.endswith("/a-x2")})
    replaced["derived/network/ip/default/a-x0"]["ip"] = "10.77.0.9"
    arranged = Sandboxes("runc", tmp_path).arrange(desired_instances(replaced, "n1"), replaced)
    assert arranged.run["default/a-x2"].sandbox == "group:default/g#1"
    assert arranged.run["default/a-x0"].sandbox == arranged.run["default/b-y1"].sandbox == "group:default/g#0"
    assert arranged.run["default/b-y1"].ip == "10.77.0.9"  # its address holder left: the next member's


def test_members_start_and_stop_together(tmp_path: Path) -> None:
    facts = group_slice("n1", SUBNET, members(a=["a-x1"], b=["b-y1"]))
    sandboxes = Sandboxes("runc", tmp_path)
    alone = without(facts, "b-y1")
    arranged = sandboxes.arrange(desired_instances(alone, "n1"), alone)
    assert arranged.run == {}
    state, reason = arranged.held["default/a-x1"]
    assert state == "pending" and "waiting for default/b of group default/g" in reason
    together = sandboxes.arrange(desired_instances(facts, "n1"), facts)
    assert set(together.run) == {"default/a-x1", "default/b-y1"}


def test_clashing_ports_are_refused_naming_both(tmp_path: Path) -> None:
    facts = group_slice("n1", SUBNET, {"a": ("sleep 30", 8080, ["a-x1"]), "b": ("sleep 30", 8080, ["b-y1"])})
    arranged = Sandboxes("runc", tmp_path).arrange(desired_instances(facts, "n1"), facts)
    assert arranged.run == {}
    state, reason = arranged.held["default/b-y1"]
    assert state == "failed" and "default/a and default/b both listen on tcp 8080" in reason


def test_without_share_network_members_keep_their_own_namespace(tmp_path: Path) -> None:
    facts = group_slice("n1", SUBNET, members(a=["a-x1"], b=["b-y1"]), share_network=False)
    arranged = Sandboxes("runc", tmp_path).arrange(desired_instances(facts, "n1"), facts)
    assert arranged.run["default/a-x1"].sandbox is None and arranged.run["default/a-x1"].ip == "10.77.0.2"


def test_shared_volume_is_mounted_in_every_member(tmp_path: Path) -> None:
    facts = group_slice("n1", SUBNET, members(a=["a-x1"], b=["b-y1"]))
    facts["desired/service/default/a"]["volumes"] = [{"name": "default/data", "path": "/srv"}]
    facts["desired/service/default/b"]["stateful"] = True  # still the one shared directory
    desired = desired_instances(facts, "n1")
    assert [(v.key, v.path) for v in desired["default/a-x1"].volumes] == [("default/data", "/srv")]
    assert [(v.key, v.path) for v in desired["default/b-y1"].volumes] == [("default/data", "/shared/data")]


def test_process_runtime_refuses_share_network(tmp_path: Path) -> None:
    core = NodeCore("n1", ProcessRuntime(tmp_path), state_dir=tmp_path)
    try:
        facts = group_slice("n1", SUBNET, members(a=["a-x1"], b=["b-y1"]))
        observed = core.apply(facts)
        doc = observed["observed/instance/default/a-x1"]
        assert doc["state"] == "failed"
        assert "process runtime has no network namespaces" in doc["reason"]
        assert core.runtime.list() == []
    finally:
        core.shutdown(remove=True)
