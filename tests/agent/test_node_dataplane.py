"""NodeCore and its data plane (memory plane, no root): the slice's VIPs and policy reach the plane
only when they change, failures never escape `apply`, and a policed instance starts only once its
address is under its policy (fail closed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ccattler.agent.dataplane.base import Frontend
from ccattler.agent.dataplane.memory import MemoryDataPlane
from ccattler.agent.desired import InstanceSpec
from ccattler.agent.node import NodeCore
from ccattler.agent.runtime.sim import SimRuntime
from ccattler.engine.facts import CcaError

GRANT = {"from": "t/web", "port": 5432, "protocol": "tcp", "rule": "r"}
FIREWALL = {"node": "n1", "identities": {"t/db": ["10.88.3.2"], "t/web": ["10.88.4.2"]},
            "policies": {"t/db": {"local": ["10.88.3.2"], "named_by": ["r"], "allowed": [GRANT]}}}
SLICE = {"derived/vip/t/db": {"ip": "10.96.0.7", "range": "10.96.0.0/16",
                              "ports": [{"port": 5432, "protocol": "tcp", "external": False}]},
         "derived/endpoint/t/db": {"endpoints": [{"instance": "db-0", "node": "n1", "ip": "10.88.3.2"}]},
         "derived/firewall/n1": FIREWALL}


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
