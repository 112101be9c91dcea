"""The overlay in the kernel: two namespaces joined by a veth (the underlay), each with its own
VXLAN device programmed by Overlay; a peer's VTEP address answers ping across it, and changes
touch only their own entries. Unique names per run; everything removed even on failure."""

from __future__ import annotations

import random
import subprocess

import pytest

from ccattler.agent.net.overlay import Overlay, Peer

from .conftest import require_root

pytestmark = pytest.mark.e2e


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def test_two_namespaces_reach_each_other_over_vxlan() -> None:
    require_root()
    tag = f"{random.randrange(16**5):05x}"
    ns1, ns2 = f"ovl1-{tag}", f"ovl2-{tag}"
    octet = random.randrange(2, 250)
    u1, u2 = f"192.168.{octet}.1", f"192.168.{octet}.2"
    s1, s2 = f"10.{octet}.1.0/24", f"10.{octet}.2.0/24"
    try:
        for ns in (ns1, ns2):
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", f"ua{tag}", "netns", ns1, "type", "veth", "peer", f"ub{tag}", "netns", ns2)
        for ns, dev, addr in ((ns1, f"ua{tag}", u1), (ns2, f"ub{tag}", u2)):
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        o1 = Overlay("ccavx0", u1, vni=4242, port=4789, netns=ns1)
        o2 = Overlay("ccavx0", u2, vni=4242, port=4789, netns=ns2)
        o1.ensure(s1)
        o2.ensure(s2)
        assert o1.sync({Peer(u2, s2)}) == ([], [Peer(u2, s2)])
        assert o1.sync({Peer(u2, s2)}) == ([], [])  # idempotent
        o2.sync({Peer(u1, s1)})
        assert "1450" in sh("ip", "-n", ns1, "link", "show", "ccavx0")
        sh("ip", "netns", "exec", ns1, "ping", "-c1", "-W2", f"10.{octet}.2.0")
        # a fresh Overlay (agent restart) reads the kernel's entries rather than re-adding them
        assert Overlay("ccavx0", u1, netns=ns1).sync({Peer(u2, s2)}) == ([], [])
        # a third peer joins and leaves: the existing route stays
        extra = Peer(f"192.168.{octet}.3", f"10.{octet}.3.0/24")
        o1.sync({Peer(u2, s2), extra})
        routes = sh("ip", "-n", ns1, "route", "show", "dev", "ccavx0")
        assert f"10.{octet}.3.0/24 via 10.{octet}.3.0" in routes and f"10.{octet}.2.0/24" in routes
        assert o1.sync({Peer(u2, s2)}) == ([extra], [])
        routes = sh("ip", "-n", ns1, "route", "show", "dev", "ccavx0")
        assert f"10.{octet}.3.0" not in routes and f"10.{octet}.2.0/24" in routes
        assert f"192.168.{octet}.3" not in sh("bridge", "-n", ns1, "fdb", "show", "dev", "ccavx0")
        sh("ip", "netns", "exec", ns1, "ping", "-c1", "-W2", f"10.{octet}.2.0")
    finally:
        for ns in (ns1, ns2):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    assert ns1 not in sh("ip", "netns", "list")
