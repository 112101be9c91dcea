"""`--dataplane` resolution (`resolve_kind`, what the node document shows at registration) and the
factory's runtime fallback: `auto` falls back to nftables when the eBPF plane cannot be set up,
removing whatever a half-made eBPF plane attached; `ebpf` asked for explicitly fails instead. No
kernel: the BPF loader and both kernel planes are stand-ins."""

from __future__ import annotations

import logging

import pytest

from ccattler.agent.dataplane import factory
from ccattler.agent.dataplane.factory import DataPlaneUnavailable, make_dataplane, resolve_kind
from ccattler.agent.process import core_dataplane
from ccattler.bpf import loader
from ccattler.engine.facts import CcaError

CGROUP = "ccattler/3fa2c1"


class FakeNft:
    name = "nftables"

    def __init__(self, bridge, gateway=None, node_addresses=()):
        self.bridge = bridge


@pytest.fixture
def host(monkeypatch):
    """A host whose eBPF support and attach outcome the test sets; records teardowns."""
    import ccattler.agent.dataplane.ebpf as ebpf
    import ccattler.agent.dataplane.nftables as nftables

    why: dict[str, object] = {"supported": None, "attach": None}
    torn: list[str] = []

    class FakeEbpf:
        name = "ebpf"

        def __init__(self, node, cgroup, state_dir, host_addresses=(), fallback=None):
            if why["attach"] is not None:
                raise why["attach"]
            self.fallback = fallback

    class FakePrograms:
        def __init__(self, node, cgroup):
            self.cgroup = cgroup

        def teardown(self):
            torn.append(self.cgroup)
            return []

    monkeypatch.setattr(loader, "supported", lambda: why["supported"])
    monkeypatch.setattr(loader, "NodePrograms", FakePrograms)
    monkeypatch.setattr(ebpf, "EbpfDataPlane", FakeEbpf)
    monkeypatch.setattr(nftables, "NftablesDataPlane", FakeNft)
    return why, torn


@pytest.mark.parametrize(("kind", "supported", "cgroup", "expected"), [
    pytest.param("nftables", "no bpftool", CGROUP, "nftables", id="nftables-as-is"),
    pytest.param("memory", None, None, "memory", id="memory-as-is"),
    pytest.param("auto", None, CGROUP, "ebpf", id="auto-ebpf-where-it-loads"),
    pytest.param("auto", "bpftool is not installed", CGROUP, "nftables", id="auto-no-bpftool"),
    pytest.param("auto", None, None, "nftables", id="auto-no-node-cgroup"),
    pytest.param("auto", None, "/", "nftables", id="auto-never-the-cgroup-root"),
    pytest.param("ebpf", None, CGROUP, "ebpf", id="ebpf-where-it-loads"),
])
def test_resolve_kind(host, kind, supported, cgroup, expected):
    host[0]["supported"] = supported
    assert resolve_kind(kind, cgroup) == expected


def test_resolve_kind_refuses_ebpf_that_cannot_run_and_unknown_kinds(host):
    host[0]["supported"] = "no cgroup v2 hierarchy is mounted"
    with pytest.raises(DataPlaneUnavailable, match="cgroup v2"):
        resolve_kind("ebpf", CGROUP)
    with pytest.raises(DataPlaneUnavailable, match="no node cgroup"):
        resolve_kind("ebpf", None)
    with pytest.raises(CcaError, match="unknown data plane 'bpf'"):
        resolve_kind("bpf", CGROUP)


def test_auto_makes_ebpf_with_nftables_beside_it(host, tmp_path):
    plane = make_dataplane("auto", "n1", bridge="cca0", state_dir=tmp_path, cgroup=CGROUP)
    assert plane.name == "ebpf" and isinstance(plane.fallback, FakeNft)
    assert host[1] == []


@pytest.mark.parametrize("failure", [
    pytest.param(loader.LoadError("bpftool cgroup attach …: Operation not permitted"), id="attach"),
    pytest.param(OSError(1, "open pinned map: Operation not permitted"), id="bpf-syscall"),
])
def test_auto_falls_back_to_nftables_when_attaching_fails(host, tmp_path, caplog, failure):
    host[0]["attach"] = failure
    with caplog.at_level(logging.WARNING, logger=factory.__name__):
        plane = make_dataplane("auto", "n1", bridge="cca0", state_dir=tmp_path, cgroup=CGROUP)
    assert plane.name == "nftables"
    assert "falling back to nftables" in caplog.text and "Operation not permitted" in caplog.text
    assert host[1] == [CGROUP]  # what the half-made plane attached is removed


def test_auto_falls_back_when_the_host_lost_ebpf_since_registration(host, tmp_path):
    host[0]["supported"] = "bpftool is not installed"
    assert make_dataplane("auto", "n1", bridge="cca0", state_dir=tmp_path, cgroup=CGROUP).name == "nftables"
    assert make_dataplane("auto", "n1", bridge="cca0", state_dir=tmp_path, cgroup=None).name == "nftables"


def test_explicit_ebpf_fails_instead_of_falling_back(host, tmp_path):
    host[0]["attach"] = loader.LoadError("attach refused")
    with pytest.raises(DataPlaneUnavailable, match="attach refused"):
        make_dataplane("ebpf", "n1", bridge="cca0", state_dir=tmp_path, cgroup=CGROUP)
    assert host[1] == []  # ebpf asked for: left to retry, nothing switched


@pytest.mark.parametrize(("shown", "requested", "expected"), [
    pytest.param(None, "auto", "memory", id="no-network-of-its-own"),
    pytest.param("ebpf", "auto", "auto", id="auto-stays-auto-to-fall-back"),
    pytest.param("nftables", "auto", "auto", id="auto-guessed-nftables"),
    pytest.param("ebpf", "ebpf", "ebpf", id="ebpf"),
    pytest.param("nftables", "nftables", "nftables", id="nftables"),
])
def test_the_node_core_keeps_auto(shown, requested, expected):
    assert core_dataplane({"dataplane": shown}, requested) == expected
