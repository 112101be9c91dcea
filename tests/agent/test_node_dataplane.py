"""NodeCore and its data plane (memory plane, no root): the slice's VIPs and policy reach the plane
only when they change, failures never escape `apply`, a policed instance starts only once its
address is under its policy, and an instance whose identity this node's firewall document does not
decide yet (guarded or open) does not start at all (fail closed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ccattler.agent.dataplane.base import Frontend
from ccattler.agent.dataplane.memory import MemoryDataPlane
from ccattler.agent.desired import InstanceSpec
from ccattler.agent.node import NodeCore
from ccattler.agent.reconcile import NotYet, Reconciler
from ccattler.agent.runtime.sim import SimRuntime
from ccattler.engine.facts import CcaError

GRANT = {"from": "t/web", "port": 5432, "protocol": "tcp", "rule": "r"}
FIREWALL = {"node": "n1",
            "policies": {"t/db": {"local": ["10.88.3.2"], "named_by": ["r"], "allowed": [GRANT]}},
            "open": ["t/web"]}
SLICE = {"derived/vip/t/db": {"ip": "10.96.0.7", "range": "10.96.0.0/16",
                              "ports": [{"port": 5432, "protocol": "tcp", "external": False}]},
         "derived/endpoint/t/db": {"endpoints": [{"instance": "db-0", "node": "n1", "ip": "10.88.3.2"}]},
         "derived/firewall/n1": FIREWALL,
         "derived/identity/t/db": {"identity": "t/db", "addresses": ["10.88.3.2"]},
         "derived/identity/t/web": {"identity": "t/web", "addresses": ["10.88.4.2"]}}


@pytest.fixture
def core(monkeypatch) -> NodeCore:
    core = NodeCore("n1", SimRuntime(), dataplane="memory")
    core.network = SimpleNamespace(gateway="10.88.3.1")  # the plane is made with the node network
    monkeypatch.setattr(core, "_route_services", lambda facts: None)  # `ip route` needs root
    return core


def test_the_slice_reaches_the_plane_only_when_it_changes(core: NodeCore) -> None:
    core._sync_dataplane(SLICE)
    core._sync_dataplane(dict(SLICE))
    plane = core.dataplane
    assert isinstance(plane, MemoryDataPlane) and plane.applies == 1
    assert [b.ip for b in plane.state.services[Frontend("10.96.0.7", 5432)]] == ["10.88.3.2"]
    assert plane.admits("10.88.4.2", "10.88.3.2", 5432, "tcp")
    assert not plane.admits("10.88.9.9", "10.88.3.2", 5432, "tcp")


def test_a_failing_plane_is_logged_and_retried_never_raised(core: NodeCore, caplog) -> None:
    core._sync_dataplane(SLICE)
    calls = []

    def broken(state):
        calls.append(state)
        raise RuntimeError("nft: no such table")

    core.dataplane.apply = broken
    later = SLICE | {"derived/endpoint/t/db": {"endpoints": []}}
    core._sync_dataplane(later)
    core._sync_dataplane(later)
    assert len(calls) == 2 and "no such table" in caplog.text  # retried, logged once
    spec = InstanceSpec("t", "db-1", "t/db", "busybox", ip="10.88.3.3")
    with pytest.raises(CcaError, match="fail closed"):
        core._admit(spec)  # the policy the slice wants is not in the kernel: do not start


def test_admit_puts_a_new_address_under_its_identitys_policy(core: NodeCore) -> None:
    core._sync_dataplane(SLICE)
    core._admit(InstanceSpec("t", "db-1", "t/db", "busybox", ip="10.88.3.3"))
    assert "10.88.3.3" in core.dataplane.state.policies["t/db"].local_ips
    assert not core.dataplane.admits("10.88.9.9", "10.88.3.3", 5432, "tcp")
    core._admit(InstanceSpec("t", "web-1", "t/web", "busybox", ip="10.88.3.4"))  # open: nothing to do


def test_an_identity_the_firewall_document_does_not_decide_yet_waits(core: NodeCore) -> None:
    """The network controller commits an instance's address before the network-policy controller
    (which runs after it) writes the firewall documents: the first instance of a guarded identity
    on a node, or a service applied together with its rule, reaches the agent before its policy.
    It waits until this node's document decides its identity (guarded or open)."""
    db = InstanceSpec("t", "db-1", "t/db", "busybox", ip="10.88.3.3")
    web = InstanceSpec("t", "web-1", "t/web", "busybox", ip="10.88.3.4")
    no_document = {k: v for k, v in SLICE.items() if not k.startswith("derived/firewall/")}
    core._sync_dataplane(no_document)
    for spec in (db, web):
        with pytest.raises(NotYet, match="derived/firewall/n1 does not decide"):
            core._admit(spec)
    # the document names other identities only (say, a failing extension's solve did not see web)
    core._sync_dataplane(no_document | {"derived/firewall/n1": {**FIREWALL, "open": []}})
    core._admit(db)  # guarded: under its policy in the kernel first
    assert "10.88.3.3" in core.dataplane.state.policies["t/db"].local_ips
    with pytest.raises(NotYet):
        core._admit(web)
    core._sync_dataplane(SLICE)
    core._admit(web)  # open on this node, as its document says


def test_waiting_for_policy_is_not_a_failed_start() -> None:
    """`NotYet` from admit holds the start without backoff or a counted restart (rollouts count
    restarts), and the next reconcile starts the instance once admit lets it."""
    decided = False

    def admit(spec: InstanceSpec) -> None:
        if not decided:
            raise NotYet("waiting for network policy: derived/firewall/n1 does not decide t/web yet")

    reconciler = Reconciler("n1", SimRuntime(), workers=1, admit=admit)
    spec = InstanceSpec("t", "web-1", "t/web", "busybox")
    [doc] = reconciler.reconcile({spec.key: spec}).values()
    assert doc["state"] == "pending" and doc["restarts"] == 0 and "network policy" in doc["reason"]
    decided = True
    [doc] = reconciler.reconcile({spec.key: spec}).values()
    assert doc["state"] in ("starting", "running") and doc["restarts"] == 0 and doc["reason"] is None
    reconciler.close()


def test_inspect_dataplane_says_why_when_the_read_back_fails(tmp_path):
    """`cca node-inspect --dataplane` never hangs on a failing kernel read: the report says why."""
    from ccattler.agent.dataplane.memory import MemoryDataPlane
    from ccattler.agent.node import NodeCore

    class Broken(MemoryDataPlane):
        def programmed(self):
            raise RuntimeError("nft list failed: Operation not permitted")

    class Runtime:  # an isolated runtime: its node programs a data plane (made here by hand)
        kind, isolated_network = "runc", True

    core = NodeCore("n1", Runtime(), state_dir=tmp_path)  # type: ignore[arg-type]
    core.dataplane = Broken()
    out = core.inspect_dataplane()
    assert out["plane"] is None and "Operation not permitted" in out["note"]
