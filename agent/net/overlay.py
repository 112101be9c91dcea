"""The node's VXLAN overlay, flannel's design (shared/NETWORK-NOTES.md A3, B1) through pyroute2:
one VXLAN device with learning off and, per peer node, a permanent neighbour (the peer's VTEP
address, its subnet's .0, -> the peer's VTEP MAC), an FDB entry (that MAC -> the peer's underlay
address) and an onlink route to the peer's container subnet via its VTEP address.

The VTEP MAC is derived from the underlay address (02:cc:a0 + its last three bytes), so nothing
beyond the nodes' observed addresses and `derived/network/subnet/<node>` has to be published.
Peers are diffed as (underlay, subnet) pairs: a joining, leaving or re-addressed node touches only
its own entries. No masquerade applies between container subnets (nat.py's no_masquerade), so
source addresses survive the crossing.
"""

from __future__ import annotations

import errno
import ipaddress
from dataclasses import dataclass
from typing import Any

from ccattler.engine.facts import CcaError
from ccattler.engine.facts.keys import OBSERVED_NODES, SUBNETS

#: VXLAN encapsulation overhead (outer IPv4 20 + UDP 8 + VXLAN 8 + inner Ethernet 14).
ENCAP_OVERHEAD = 50
NUD_PERMANENT = 0x80
RTNH_F_ONLINK = 4


class OverlayError(CcaError):
    """The overlay could not be programmed (the message names the device and the entry)."""


@dataclass(frozen=True, order=True)
class Peer:
    """One remote node as the overlay needs it."""

    underlay: str  # the node's observed address (VXLAN outer destination)
    subnet: str  # its container subnet (derived/network/subnet/<node>)

    @property
    def mac(self) -> str:
        return vtep_mac(self.underlay)

    @property
    def vtep(self) -> str:
        return vtep_address(self.subnet)


def vtep_mac(underlay: str) -> str:
    """A locally administered MAC unique per underlay IPv4 address."""
    b = ipaddress.IPv4Address(underlay).packed
    return f"02:cc:a0:{b[1]:02x}:{b[2]:02x}:{b[3]:02x}"


def vtep_address(subnet: str) -> str:
    """The VTEP address of a node: its subnet's network address (.0), as flannel does."""
    return str(ipaddress.ip_network(subnet).network_address)


def desired_peers(self_node: str, addresses: dict[str, str], subnets: dict[str, str]) -> set[Peer]:
    """Every other node that has both an IPv4 underlay address and a valid subnet.

    Nodes without either are not (yet) reachable and are left out rather than refused: the slice
    fills in as the nodes report and the controller allocates."""
    peers = set()
    for node, subnet in subnets.items():
        address = addresses.get(node)
        if node == self_node or not address:
            continue
        try:
            ipaddress.IPv4Address(address)
            net = ipaddress.IPv4Network(subnet)
        except ValueError:
            continue
        peers.add(Peer(address, str(net)))
    return peers


def peers_from_slice(facts: Any, self_node: str) -> set[Peer]:
    """The peers in a node's slice: `observed/node/<n>` `address` joined with
    `derived/network/subnet/<n>` `subnet` (both shared cluster-wide by engine/api/slice.py)."""
    addresses, subnets = {}, {}
    for key, doc in facts.items():
        if not isinstance(doc, dict):
            continue
        if key.startswith(OBSERVED_NODES):
            addresses[key[len(OBSERVED_NODES):]] = doc.get("address")
        elif key.startswith(SUBNETS):
            subnets[key[len(SUBNETS):]] = doc.get("subnet")
    return desired_peers(self_node, addresses, {n: s for n, s in subnets.items() if isinstance(s, str)})


def device_name(bridge: str) -> str:
    """The node's VXLAN device, named after its bridge (interface names are at most 15 bytes)."""
    return f"vx{bridge}"[:15]


def diff(current: set[Peer], desired: set[Peer]) -> tuple[list[Peer], list[Peer]]:
    """(to remove, to add); a node that changed address is one of each. Removals go first so the
    new entries of a re-addressed node are never deleted by its old ones' cleanup."""
    return sorted(current - desired), sorted(desired - current)


class Overlay:
    """The VXLAN device of one node (in netns `netns`, or the current one) and its peer entries."""

    def __init__(self, device: str, local: str, vni: int = 42, port: int = 4789,
                 underlay_mtu: int = 1500, netns: str | None = None):
        self.device, self.local, self.vni, self.port = device, local, vni, port
        self.mtu = underlay_mtu - ENCAP_OVERHEAD
        self.netns = netns
        self.peers: set[Peer] | None = None  # None: not read from the kernel yet
        self.subnet: str | None = None  # the own subnet ensure() set up

    def _ipr(self) -> Any:
        from pyroute2 import IPRoute

        return IPRoute(netns=self.netns) if self.netns else IPRoute()

    def ensure(self, subnet: str) -> None:
        """Create the device if missing (own VTEP address = `subnet`'s .0/32), set it up."""
        with self._ipr() as ipr:
            found = ipr.link_lookup(ifname=self.device)
            if not found:
                try:
                    ipr.link("add", ifname=self.device, kind="vxlan", vxlan_id=self.vni,
                             vxlan_port=self.port, vxlan_local=self.local, vxlan_learning=0,
                             address=vtep_mac(self.local), mtu=self.mtu)
                except Exception as e:
                    raise OverlayError(f"vxlan device {self.device} (vni {self.vni}, port {self.port}, "
                                       f"local {self.local}): {e}") from None
                found = ipr.link_lookup(ifname=self.device)
            index = found[0]
            try:
                ipr.addr("add", index=index, address=vtep_address(subnet), prefixlen=32)
            except Exception as e:
                if getattr(e, "code", None) != errno.EEXIST:
                    raise OverlayError(f"{self.device}: address {vtep_address(subnet)}: {e}") from None
            ipr.link("set", index=index, state="up")
        self.subnet = subnet

    def _read(self, ipr: Any, index: int) -> set[Peer]:
        """The peers the kernel holds (after an agent restart): onlink routes on the device joined
        with its FDB entries by VTEP MAC."""
        dst_by_mac = {}
        for entry in ipr.fdb("dump", ifindex=index):
            mac, dst = entry.get_attr("NDA_LLADDR"), entry.get_attr("NDA_DST")
            if mac and dst and mac != "00:00:00:00:00:00":
                dst_by_mac[mac] = dst
        peers = set()
        for route in ipr.route("dump", oif=index):
            dst, length = route.get_attr("RTA_DST"), route["dst_len"]
            gateway = route.get_attr("RTA_GATEWAY")
            if not dst or not gateway or length >= 32:
                continue
            for mac, underlay in dst_by_mac.items():
                peer = Peer(underlay, f"{dst}/{length}")
                if vtep_mac(underlay) == mac and peer.vtep == gateway:
                    peers.add(peer)
        return peers

    def sync(self, desired: set[Peer]) -> tuple[list[Peer], list[Peer]]:
        """Make the kernel hold exactly `desired`; returns (removed, added). Idempotent."""
        with self._ipr() as ipr:
            found = ipr.link_lookup(ifname=self.device)
            if not found:
                raise OverlayError(f"vxlan device {self.device} is missing (ensure() first)")
            index = found[0]
            if self.peers is None:
                self.peers = self._read(ipr, index)
            remove, add = diff(self.peers, desired)
            for peer in remove:
                for method, args in (("route", {"dst": peer.subnet, "oif": index}),
                                     ("neigh", {"dst": peer.vtep, "lladdr": peer.mac, "ifindex": index}),
                                     ("fdb", {"ifindex": index, "lladdr": peer.mac, "dst": peer.underlay})):
                    try:
                        getattr(ipr, method)("del", **args)
                    except Exception as e:  # already gone is what we want
                        if getattr(e, "code", None) not in (errno.ENOENT, errno.ESRCH, errno.EADDRNOTAVAIL):
                            raise OverlayError(f"{self.device}: removing peer {peer}: {e}") from None
                self.peers.discard(peer)
            for peer in add:
                try:
                    try:
                        ipr.fdb("append", ifindex=index, lladdr=peer.mac, dst=peer.underlay)
                    except Exception as e:
                        if getattr(e, "code", None) != errno.EEXIST:
                            raise
                    ipr.neigh("replace", dst=peer.vtep, lladdr=peer.mac, ifindex=index, state=NUD_PERMANENT)
                    ipr.route("replace", dst=peer.subnet, gateway=peer.vtep, oif=index, flags=RTNH_F_ONLINK)
                except Exception as e:
                    raise OverlayError(f"{self.device}: adding peer {peer}: {e}") from None
                self.peers.add(peer)
            return remove, add

    def remove(self) -> None:
        """Delete the device (its neighbours, FDB entries and routes go with it)."""
        with self._ipr() as ipr:
            for index in ipr.link_lookup(ifname=self.device):
                ipr.link("del", index=index)
        self.peers = None
