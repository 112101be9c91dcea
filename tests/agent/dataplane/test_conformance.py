"""The data plane contract (agent/dataplane/base.py), held to the same checks on the in-memory plane,
on the nftables plane (in a throwaway network namespace made and removed by the fixture) and on the
eBPF plane (programs attached to a throwaway cgroup, maps pinned under a throwaway bpffs directory,
its nftables fallback for external ports in a throwaway namespace; skipped where BPF cannot load):
apply/programmed round trip, idempotence, diff-only changes, repair after a restart, bad input
refused before anything changes. Backends compare as address and port (what a kernel keeps).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend, PolicyIngress
from ccattler.agent.dataplane.memory import MemoryDataPlane
from ccattler.agent.dataplane.nftables import NftablesDataPlane, ServiceTableError
from ccattler.agent.dataplane.policy_nft import run_command
from ccattler.agent.net import netns

KERNEL = os.geteuid() == 0 and shutil.which("nft") is not None


def _bpf_unavailable() -> str | None:
    if not KERNEL:
        return "needs root and nft"
    from ccattler.bpf import loader

    return loader.supported()


def normal(state: DataPlaneState) -> DataPlaneState:
    def n(table):
        return {f: tuple(sorted({Backend(b.ip, b.port) for b in bs})) for f, bs in table.items()}

    return replace(state, services=n(state.services), external=n(state.external),
                   identities={k: v for k, v in state.identities.items() if v})


def backends(*last_octets: int, port: int = 8080) -> tuple[Backend, ...]:
    return tuple(Backend(f"10.78.1.{i}", port, node="n1", instance=f"web-{i}") for i in last_octets)


STATE = DataPlaneState(
    services={Frontend("10.96.0.10", 80): backends(2, 3),
              Frontend("10.96.0.11", 53, "udp"): backends(4, port=53),
              Frontend("10.96.0.12", 80): ()},                        # no ready backend: refuse
    external={Frontend("", 443): backends(3, port=8443)},
    identities={"shop/db": frozenset({"10.78.1.4"}), "shop/api": frozenset({"10.78.1.2"})},
    policies={"shop/db": PolicyIngress("shop/db", frozenset({"10.78.1.4"}),
                                       frozenset({("shop/api", 53, "udp")}))})


class Nft:
    """An nftables plane in its own network namespace, and how to make another over the same table."""

    def __init__(self, in_process: bool = False) -> None:
        self.in_process = in_process
        self.ns = f"cnf{secrets.token_hex(4)}"
        self.bridge = f"cb{secrets.token_hex(3)}"
        netns.create(self.ns)
        self.sh("ip", "link", "add", self.bridge, "type", "bridge")
        self.sh("ip", "addr", "add", "10.78.1.1/24", "dev", self.bridge)
        self.sh("ip", "link", "set", self.bridge, "up")

    def run(self, argv, stdin=None):
        return run_command(["ip", "netns", "exec", self.ns, *argv], stdin)

    def sh(self, *argv):
        return self.run(list(argv))

    def new(self) -> NftablesDataPlane:
        if self.in_process:  # the default runner: libnftables in this process, as an agent runs it
            return InNetns(self.ns, lambda: NftablesDataPlane(self.bridge, "10.78.1.1", ("192.168.78.1",)))
        return NftablesDataPlane(self.bridge, "10.78.1.1", ("192.168.78.1",), run=self.run)

    def close(self) -> None:
        netns.remove(self.ns)


class InNetns:
    """A plane whose every method call runs on a thread inside namespace `ns` (libnftables' socket
    and the tools it forks belong to the calling thread's namespace)."""

    def __init__(self, ns: str, make) -> None:
        self._ns = ns
        self._plane = netns.run_in(ns, make)

    def __getattr__(self, name):
        value = getattr(self._plane, name)
        if not callable(value):
            return value
        return lambda *a, **k: netns.run_in(self._ns, lambda: value(*a, **k))


class Ebpf:
    """An eBPF plane on a cgroup of its own, with its nftables fallback in a namespace of its own, and
    how to make another over the same pins (a restarted agent)."""

    def __init__(self) -> None:
        from ccattler.bpf.loader import NodePrograms

        tag = secrets.token_hex(3)
        self.pin, self.top, self.cgroup = f"ccatest-{tag}", f"ccatest-{tag}", f"ccatest-{tag}/node"
        self.state_dir = Path(tempfile.mkdtemp(prefix="cca-ebpf-"))
        self.nft = Nft()
        self.programs = NodePrograms(self.pin, self.cgroup)
        self.planes: list = []

    def new(self):
        from ccattler.agent.dataplane.ebpf import EbpfDataPlane

        p = EbpfDataPlane(self.pin, self.cgroup, self.state_dir, host_addresses=("10.78.1.1", "192.168.78.1"),
                          fallback=self.nft.new())
        self.planes.append(p)
        return p

    def close(self) -> None:
        from ccattler.bpf.loader import cgroup2_root

        try:
            for p in self.planes:
                for m in p.maps.values():
                    m.close()
            self.programs.teardown()
            for d in (cgroup2_root() / self.cgroup, cgroup2_root() / self.top):
                for _ in range(50):
                    try:
                        d.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.05)
        finally:
            self.nft.close()
            shutil.rmtree(self.state_dir, ignore_errors=True)


@pytest.fixture(params=["memory", "nftables", "nftables-libnft", "ebpf"])
def plane(request):
    if request.param == "memory":
        yield request.param, MemoryDataPlane(), None
        return
    if request.param == "ebpf":
        why = _bpf_unavailable()
        if why is not None:
            pytest.skip(f"the eBPF plane cannot load here: {why}")
        env = Ebpf()
        try:
            yield "ebpf", env.new(), env
        finally:
            env.close()
        return
    if not KERNEL:
        pytest.skip("needs root and nft")
    env = Nft(in_process=request.param == "nftables-libnft")
    try:
        yield request.param.split("-")[0], env.new(), env
    finally:
        env.close()


def changes(kind: str, p) -> int:
    if kind == "ebpf":  # map elements written, and its fallback's nftables transactions
        return p.writes + p.fallback.transactions
    return p.applies if kind == "memory" else p.transactions


def test_round_trip_and_idempotence(plane):
    kind, p, _ = plane
    p.apply(STATE)
    assert normal(p.programmed()) == normal(STATE)
    before = changes(kind, p)
    p.apply(STATE)
    p.apply(DataPlaneState(**{k: dict(getattr(STATE, k)) for k in STATE.__dataclass_fields__}))  # equal copy
    assert changes(kind, p) == before
    p.teardown()
    assert normal(p.programmed()).services == {}


def test_one_service_changed_is_one_small_diff(plane):
    kind, p, _ = plane
    p.apply(STATE)
    writes = getattr(p, "writes", 0)
    services = dict(STATE.services)
    services[Frontend("10.96.0.10", 80)] = backends(3, 5)    # 2 left, 5 joined
    services[Frontend("10.96.0.12", 80)] = backends(6)       # first ready backend
    del services[Frontend("10.96.0.11", 53, "udp")]
    changed = replace(STATE, services=services)
    p.apply(changed)
    assert normal(p.programmed()) == normal(changed)
    if kind == "ebpf":  # .10: 2 slots rewritten; .12: a slot and its count; .11: frontend and slot
        assert p.writes - writes == 6
        assert "443" not in p.fallback.last_script  # the external port was not touched
    if kind == "nftables":
        script = p.last_script
        assert "delete table" not in script and "10.96.0.11 . udp . 53" in script
        assert "443" not in script  # the external port was not touched
        assert "10.78.1.5 . 10.78.1.5" in script and "10.78.1.4 . 10.78.1.4" in script  # hairpin
        assert p.replaced == 1 and p.transactions == 2


def test_rebuilt_reordered_and_swapped_frontends_diff_correctly(plane):
    kind, p, _ = plane
    p.apply(STATE)
    rebuilt = {Frontend(f.ip, f.port, f.protocol): tuple(Backend(b.ip, b.port) for b in bs)
               for f, bs in reversed(list(STATE.services.items()))}
    writes = getattr(p, "writes", 0)
    p.apply(replace(STATE, services=rebuilt))  # equal, other objects, other order
    assert normal(p.programmed()) == normal(STATE)
    if kind == "ebpf":
        assert p.writes == writes
    swapped = dict(STATE.services)
    del swapped[Frontend("10.96.0.12", 80)]
    swapped[Frontend("10.96.0.13", 80)] = backends(2)  # same count, one frontend replaced
    p.apply(replace(STATE, services=swapped))
    assert normal(p.programmed()) == normal(replace(STATE, services=swapped))
    if kind == "ebpf":  # .12 deleted (no slots); .13: its slot and its count
        assert p.writes - writes == 3
    if kind == "nftables":
        assert p.transactions == 2 and "10.96.0.12" in p.last_script


def test_restart_repairs_instead_of_appending(plane):
    kind, p, env = plane
    if kind == "memory":
        pytest.skip("the memory plane has no kernel to read back")
    if kind == "ebpf":
        _ebpf_restart_repairs(p, env)
        return
    p.apply(STATE)
    # drift while the agent is down: an element removed, a stale service added by hand
    t = f"ip {p.table}"
    env.run(["nft", "-f", "-"], f"delete element {t} slots {{ 10.96.0.10 . tcp . 80 . 1 }}\n"
                                f"add element {t} services {{ 10.96.0.99 . tcp . 1 : goto pick_1 }}\n"
                                f"add element {t} slots {{ 10.96.0.99 . tcp . 1 . 0 : 10.78.1.9 . 1 }}\n")
    restarted = env.new()
    restarted.apply(STATE)
    assert normal(restarted.programmed()).services == normal(STATE).services
    assert restarted.replaced == 0 and restarted.transactions == 1  # a repair, not a new table
    assert "10.96.0.99" in restarted.last_script and "10.96.0.10 . tcp . 80 . 1" in restarted.last_script
    assert "10.78.1.9 . 10.78.1.9" not in env.run(["nft", "list", "set", "ip", p.table, "hairpin"])
    third = env.new()
    third.apply(STATE)
    assert third.transactions == 0  # the kernel already matches: nothing sent


def _ebpf_restart_repairs(p, env) -> None:
    from ccattler.bpf import maps

    p.apply(STATE)
    # drift while the agent is down: a slot removed, a stale service added by hand
    [sid] = [maps.parse_svc_val(v)[0] for k, v in p.maps["cca_services"].read_all().items()
             if maps.parse_svc_key(k) == ("10.96.0.10", 80, "tcp")]
    assert p.maps["cca_backends"].delete(maps.backend_key(sid, 1))
    p.maps["cca_services"].update(maps.svc_key("10.96.0.99", 1, "tcp"), maps.svc_val(99, 1))
    p.maps["cca_backends"].update(maps.backend_key(99, 0), maps.backend_val("10.78.1.9", 1))
    restarted = env.new()
    restarted.apply(STATE)
    assert normal(restarted.programmed()) == normal(STATE)
    assert restarted.writes == 3  # the slot back, the stale frontend and its slot gone: a repair
    third = env.new()
    third.apply(STATE)
    assert changes("ebpf", third) == 0  # the kernel already matches: nothing written


def test_policy_reads_back_from_the_kernel_and_admit_fails_closed(plane):
    kind, p, env = plane
    if kind == "memory":
        pytest.skip("admit is the kernel planes' (the memory plane has nothing to fail open)")
    allowed = frozenset({("shop/api", 53, "udp"), ("shop/api", 0, "any"), ("shop/web", 80, "any"),
                         ("shop/web", 0, "tcp")})
    state = replace(STATE, identities={**STATE.identities, "shop/web": frozenset({"10.78.1.7"})},
                    policies={"shop/db": PolicyIngress("shop/db", frozenset({"10.78.1.4"}), allowed)})
    p.apply(state)
    assert normal(env.new().programmed()) == normal(state)  # read from the kernel, not a record
    p.admit("shop/db", "10.78.1.8")
    got = env.new().programmed()
    assert "10.78.1.8" in got.policies["shop/db"].local_ips and "10.78.1.8" in got.identities["shop/db"]


def test_bad_input_is_refused_before_any_change(plane):
    kind, p, _ = plane
    if kind == "memory":
        pytest.skip("the memory plane does not validate")
    p.apply(STATE)
    bad = replace(STATE, services={**STATE.services, Frontend("10.96.0.300", 80): backends(2)})
    with pytest.raises(ServiceTableError, match="10.96.0.300"):
        p.apply(bad)
    with pytest.raises(ServiceTableError, match="protocol"):
        p.apply(replace(STATE, services={Frontend("10.96.0.20", 80, "sctp"): ()}))
    assert normal(p.programmed()) == normal(STATE)


def test_many_backends_use_wide_slots(plane):
    kind, p, _ = plane
    many = tuple(Backend(f"10.78.{2 + i // 250}.{1 + i % 250}", 80) for i in range(40))
    state = DataPlaneState(services={Frontend("10.96.0.30", 80): many})
    p.apply(state)
    assert normal(p.programmed()) == normal(state)
    fewer = DataPlaneState(services={Frontend("10.96.0.30", 80): many[:3]})
    p.apply(fewer)
    assert normal(p.programmed()) == normal(fewer)
