"""The network controller's address allocation: a subnet per node, an address per placed instance.

Each node that matters (observed, declared, holding placements, or with a condition) gets a
`/node_prefix` (default /24) out of the cluster CIDR (default 10.88.0.0/16) at
`derived/network/subnet/<node>`; it stays while any of those facts exist and is freed after.
Each placed instance gets `derived/network/ip/<tenant>/<instance>` in its node's subnet, stable
while it stays on that node. Allocation is lowest-free, in name order: pure and deterministic.
The knobs are the constructor's `cluster_cidr` and `node_prefix`.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any, ClassVar

from ccattler.engine.controllers.base import ChangeSet, Snapshot
from ccattler.engine.controllers.failure import CONDITIONS, DECLARED_NODES, OBSERVED_NODES, PLACEMENTS
from ccattler.engine.facts import CcaError

SUBNETS = "derived/network/subnet/"
ADDRESSES = "derived/network/ip/"
DEFAULT_CLUSTER_CIDR = "10.88.0.0/16"
DEFAULT_NODE_PREFIX = 24


class InvalidNetworkConfig(CcaError):
    """The cluster CIDR or the per-node prefix length cannot be used."""


def _ip_to_int(text: object) -> int | None:
    """A dotted-quad IPv4 address as an int, or None (fast: this runs once per instance per tick)."""
    try:
        packed = socket.inet_aton(text) if isinstance(text, str) else None
    except OSError:
        return None
    if packed is None or socket.inet_ntoa(packed) != text:  # inet_aton also takes "10.1" and the like
        return None
    return int.from_bytes(packed, "big")


def _int_to_ip(value: int) -> str:
    return socket.inet_ntoa(value.to_bytes(4, "big"))


@dataclass(frozen=True, slots=True)
class _NodeNet:
    """A node's subnet as integers: offset 0 is the network, 1 the bridge (gateway), the last the
    broadcast; instances get offsets 2 … size - 2."""

    base: int
    size: int
    prefix: int
    gateway: str


class NetworkController:
    """Allocates node subnets and instance addresses."""

    name: ClassVar[str] = "network"
    reads: ClassVar[tuple[str, ...]] = (
        OBSERVED_NODES, DECLARED_NODES, CONDITIONS, PLACEMENTS, SUBNETS, ADDRESSES,
    )
    writes: ClassVar[tuple[str, ...]] = (SUBNETS, ADDRESSES)

    def __init__(
        self, cluster_cidr: str = DEFAULT_CLUSTER_CIDR, node_prefix: int = DEFAULT_NODE_PREFIX
    ) -> None:
        try:
            self.cluster = ipaddress.IPv4Network(cluster_cidr)
        except ValueError as exc:
            raise InvalidNetworkConfig(
                f"cluster CIDR {cluster_cidr!r} is not an IPv4 network: {exc}"
            ) from None
        if not self.cluster.prefixlen <= node_prefix <= 30:
            raise InvalidNetworkConfig(
                f"node prefix /{node_prefix} must be between the cluster's /{self.cluster.prefixlen} and /30"
            )
        self.node_prefix = node_prefix
        self._block = 1 << (32 - node_prefix)
        self._subnet_count = 1 << (node_prefix - self.cluster.prefixlen)

    def depends_on(self, key: str) -> tuple[str, ...]:
        """An address follows its instance's placement: guard on it."""
        if key.startswith(ADDRESSES):
            return (PLACEMENTS + key[len(ADDRESSES):],)
        return ()

    def _subnet(self, index: int) -> ipaddress.IPv4Network:
        base = int(self.cluster.network_address) + index * self._block
        return ipaddress.IPv4Network((base, self.node_prefix))

    def _index(self, text: object) -> int | None:
        """The subnet index of `text` if it is one of our node subnets, else None."""
        try:
            net = ipaddress.IPv4Network(str(text))
        except ValueError:
            return None
        if net.prefixlen != self.node_prefix or not net.subnet_of(self.cluster):
            return None
        return (int(net.network_address) - int(self.cluster.network_address)) // self._block

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        # One pass over the snapshot, the most numerous prefixes tested first.
        placements: dict[str, Any] = {}
        addresses: list[tuple[str, Any]] = []
        subnets: list[tuple[str, Any]] = []
        nodes: set[str] = set()
        for key, doc in snapshot.values.items():
            if key.startswith(PLACEMENTS):
                placements[key[len(PLACEMENTS):]] = doc
            elif key.startswith(ADDRESSES):
                addresses.append((key, doc))
            elif key.startswith(SUBNETS):
                subnets.append((key, doc))
            else:
                for prefix in (OBSERVED_NODES, DECLARED_NODES, CONDITIONS):
                    if key.startswith(prefix):
                        nodes.add(key[len(prefix):])
        nodes |= {str(doc["node"]) for doc in placements.values() if doc.get("node")}
        puts: dict[str, Any] = {}
        deletes: set[str] = set()
        # Existing documents in key order: on a duplicate, the first name keeps its allocation.
        nets = self._allocate_subnets(sorted(subnets), nodes, puts, deletes)
        self._allocate_addresses(sorted(addresses), placements, nets, puts, deletes)
        return ChangeSet(puts, frozenset(deletes))

    def _allocate_subnets(
        self, existing: list[tuple[str, Any]], nodes: set[str], puts: dict[str, Any], deletes: set[str]
    ) -> dict[str, _NodeNet]:
        """node → subnet for every node that has (or now gets) one."""
        kept: dict[str, int] = {}
        used: set[int] = set()
        for key, doc in existing:
            node = key[len(SUBNETS):]
            index = self._index(doc.get("subnet"))
            if node not in nodes or index is None or index in used:
                deletes.add(key)  # gone, outside the cluster CIDR, or a duplicate (the first name keeps it)
                continue
            kept[node] = index
            used.add(index)
            want = self._subnet_doc(node, index)
            if doc != want:
                puts[key] = want
        free = (i for i in range(self._subnet_count) if i not in used)
        for node in sorted(nodes - kept.keys()):
            index = next(free, None)
            if index is None:
                break  # the cluster CIDR is exhausted: these nodes get no subnet (and no addresses)
            kept[node] = index
            deletes.discard(SUBNETS + node)
            puts[SUBNETS + node] = self._subnet_doc(node, index)
        return {node: self._node_net(index) for node, index in kept.items()}

    def _node_net(self, index: int) -> _NodeNet:
        base = int(self.cluster.network_address) + index * self._block
        return _NodeNet(base, self._block, self.node_prefix, _int_to_ip(base + 1))

    def _subnet_doc(self, node: str, index: int) -> dict[str, Any]:
        net = self._subnet(index)
        return {"node": node, "subnet": str(net), "gateway": str(net.network_address + 1)}

    def _allocate_addresses(
        self,
        existing: list[tuple[str, Any]],
        placements: dict[str, Any],
        subnets: dict[str, _NodeNet],
        puts: dict[str, Any],
        deletes: set[str],
    ) -> None:
        used: dict[str, set[int]] = {node: set() for node in subnets}
        kept: set[str] = set()
        for key, doc in existing:
            name = key[len(ADDRESSES):]
            placement = placements.get(name)
            node = placement.get("node") if placement else None
            offset = self._offset(doc.get("ip"), subnets.get(node)) if node == doc.get("node") else None
            if offset is None or offset in used[node]:
                deletes.add(key)  # unplaced, moved, outside its node's subnet, or a duplicate
                continue
            used[node].add(offset)
            kept.add(name)
            want = self._address_doc(placement, subnets[node], offset)
            if doc != want:
                puts[key] = want
        for name in sorted(placements.keys() - kept):
            placement = placements[name]
            subnet = subnets.get(placement.get("node"))
            if subnet is None:
                continue
            taken = used[placement["node"]]
            offset = next((o for o in range(2, subnet.size - 1) if o not in taken), None)
            if offset is None:
                continue  # the node's subnet is full; the instance waits without an address
            taken.add(offset)
            deletes.discard(ADDRESSES + name)
            puts[ADDRESSES + name] = self._address_doc(placement, subnet, offset)

    @staticmethod
    def _offset(ip: object, subnet: _NodeNet | None) -> int | None:
        address = _ip_to_int(ip) if subnet is not None else None
        if address is None:
            return None
        offset = address - subnet.base
        return offset if 2 <= offset < subnet.size - 1 else None

    @staticmethod
    def _address_doc(placement: dict[str, Any], subnet: _NodeNet, offset: int) -> dict[str, Any]:
        return {
            "instance": placement.get("instance"),
            "service": placement.get("service"),
            "node": placement["node"],
            "ip": _int_to_ip(subnet.base + offset),
            "prefix": subnet.prefix,
            "gateway": subnet.gateway,
        }
