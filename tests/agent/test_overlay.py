"""The overlay's diff logic: which peers a node programs, and what changes touch."""

from __future__ import annotations

from ccattler.agent.net.overlay import (
    ENCAP_OVERHEAD,
    Overlay,
    Peer,
    desired_peers,
    device_name,
    diff,
    peers_from_slice,
    vtep_address,
    vtep_mac,
)


def test_vtep_mac_and_address_are_derived() -> None:
    assert vtep_mac("192.168.77.2") == "02:cc:a0:a8:4d:02"
    assert vtep_address("10.88.3.0/24") == "10.88.3.0"
    assert Overlay("x", "192.168.77.1", underlay_mtu=1500).mtu == 1500 - ENCAP_OVERHEAD == 1450


def test_desired_peers_skip_self_and_incomplete_nodes() -> None:
    addresses = {"n1": "192.168.77.1", "n2": "192.168.77.2", "n3": "192.168.77.3", "n4": "not-an-ip"}
    subnets = {"n1": "10.88.1.0/24", "n2": "10.88.2.0/24", "n4": "10.88.4.0/24", "n5": "10.88.5.0/24"}
    assert desired_peers("n1", addresses, subnets) == {Peer("192.168.77.2", "10.88.2.0/24")}


def test_diff_touches_only_the_changed_peer() -> None:
    a, b, c = Peer("192.168.77.2", "10.88.2.0/24"), Peer("192.168.77.3", "10.88.3.0/24"), \
        Peer("192.168.77.4", "10.88.4.0/24")
    assert diff({a, b}, {a, b}) == ([], [])  # idempotent
    assert diff({a}, {a, b}) == ([], [b])  # joining
    assert diff({a, b}, {a}) == ([b], [])  # leaving
    moved = Peer("192.168.77.9", "10.88.3.0/24")
    assert diff({a, b, c}, {a, moved, c}) == ([b], [moved])  # re-addressed: old out, new in


def test_peers_from_slice_join_addresses_and_subnets() -> None:
    facts = {"observed/node/n1": {"address": "192.168.77.1"}, "observed/node/n2": {"address": "192.168.77.2"},
             "derived/network/subnet/n1": {"node": "n1", "subnet": "10.88.1.0/24"},
             "derived/network/subnet/n2": {"node": "n2", "subnet": "10.88.2.0/24"},
             "derived/network/subnet/n3": {"node": "n3", "subnet": "10.88.3.0/24"}, "other": "x"}
    assert peers_from_slice(facts, "n1") == {Peer("192.168.77.2", "10.88.2.0/24")}
    assert device_name("cca-abcdef123456") == "vxcca-abcdef123"
