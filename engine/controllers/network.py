"""The network controller's address allocation: a subnet per node, an address per placed instance.

Each node that matters (observed, declared, holding placements, or with a condition) gets a
`/node_prefix` (default /24) out of the cluster CIDR (default 10.88.0.0/16) at
`derived/network/subnet/<node>`; it stays while any of those facts exist and is freed after.
Each placed instance gets `derived/network/ip/<tenant>/<instance>` in its node's subnet, stable
while it stays on that node. Allocation is lowest-free, in name order: pure and deterministic.
Each service that exposes a port gets a virtual IP at `derived/vip/<tenant>/<service>`
(engine/controllers/vip.py), and the names the node resolvers serve for it at
`derived/dns/<tenant>/<service>` (engine/controllers/dns.py). The knobs are the constructor's
`cluster_cidr`, `node_prefix` and `service_cidr`.
"""

from __future__ import annotations

import ipaddress
import socket
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, ClassVar

from ccattler.engine.controllers.dns import DnsNames
from ccattler.engine.controllers.vip import DEFAULT_SERVICE_CIDR, VipAllocator
from ccattler.engine.facts import CcaError
from ccattler.engine.facts.keys import (
    ADDRESSES,
    DESIRED_NODES,
    DESIRED_SERVICES,
    DNS,
    NODE_CONDITIONS,
    OBSERVED_NODES,
    PLACEMENTS,
    SUBNETS,
    VIPS,
)
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot

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


def _after(docs: dict[str, Any], prefix: str, puts: dict[str, Any], deletes: set[str]) -> dict[str, Any]:
    """`docs` (keys without `prefix`) with this run's puts and deletes under `prefix` applied."""
    changed = [k for k in puts if k.startswith(prefix)] + [k for k in deletes if k.startswith(prefix)]
    if not changed:
        return docs
    out = dict(docs)
    for key in deletes:
        if key.startswith(prefix):
            out.pop(key[len(prefix):], None)
    for key in changed:
        if key in puts:
            out[key[len(prefix):]] = puts[key]
    return out


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
    timeless: ClassVar[bool] = True  # its changes follow the snapshot alone (not `now`)
    reads: ClassVar[tuple[str, ...]] = (
        OBSERVED_NODES, DESIRED_NODES, NODE_CONDITIONS, PLACEMENTS, SUBNETS, ADDRESSES, DESIRED_SERVICES,
        VIPS, DNS,
    )
    writes: ClassVar[tuple[str, ...]] = (SUBNETS, ADDRESSES, VIPS, DNS)

    def __init__(
        self, cluster_cidr: str = DEFAULT_CLUSTER_CIDR, node_prefix: int = DEFAULT_NODE_PREFIX,
        service_cidr: str = DEFAULT_SERVICE_CIDR,
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
        self.vips = VipAllocator(service_cidr, cluster_cidr)
        self.names = DnsNames()
        self._settled: dict[str, tuple[Any, ...]] = {}  # node → inputs of its last no-change run
        self._block = 1 << (32 - node_prefix)
        self._subnet_count = 1 << (node_prefix - self.cluster.prefixlen)
        self._base = int(self.cluster.network_address)

    def depends_on(self, key: str) -> tuple[str, ...]:
        """An address follows its instance's placement: guard on it."""
        if key.startswith(ADDRESSES):
            return (PLACEMENTS + key[len(ADDRESSES):],)
        return ()

    def _index(self, text: object) -> int | None:
        """The subnet index of `text` if it is exactly one of our node subnets, else None."""
        address, _, prefix = text.partition("/") if isinstance(text, str) else ("", "", "")
        base = _ip_to_int(address)
        if base is None or prefix != str(self.node_prefix):
            return None
        index, rest = divmod(base - self._base, self._block)
        return index if rest == 0 and 0 <= index < self._subnet_count else None

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        # One pass over the snapshot, the most numerous prefixes tested first.
        placements: dict[str, Any] = {}
        addresses: list[tuple[str, Any]] = []
        subnets: list[tuple[str, Any]] = []
        nodes: set[str] = set()
        services: dict[str, Any] = {}
        vips: dict[str, Any] = {}
        names: dict[str, Any] = {}
        for key, doc in snapshot.values.items():
            if key.startswith(PLACEMENTS):
                placements[key[len(PLACEMENTS):]] = doc
            elif key.startswith(ADDRESSES):
                addresses.append((key, doc))
            elif key.startswith(DESIRED_SERVICES):
                services[key[len(DESIRED_SERVICES):]] = doc
            elif key.startswith(VIPS):
                vips[key[len(VIPS):]] = doc
            elif key.startswith(SUBNETS):
                subnets.append((key, doc))
            elif key.startswith(DNS):
                names[key[len(DNS):]] = doc
            else:
                for prefix in (OBSERVED_NODES, DESIRED_NODES, NODE_CONDITIONS):
                    if key.startswith(prefix):
                        nodes.add(key[len(prefix):])
        nodes |= {str(doc["node"]) for doc in placements.values() if doc.get("node")}
        puts: dict[str, Any] = {}
        deletes: set[str] = set()
        # Existing documents in key order: on a duplicate, the first name keeps its allocation.
        nets = self._allocate_subnets(sorted(subnets), nodes, puts, deletes)
        self._allocate_addresses(sorted(addresses), placements, nets, puts, deletes)
        self.vips.reconcile(services, vips, puts, deletes)
        # Names follow the VIPs and addresses as this run leaves them (not as it found them).
        self.names.reconcile(services, _after(vips, VIPS, puts, deletes),
                             _after({k[len(ADDRESSES):]: d for k, d in addresses}, ADDRESSES, puts, deletes),
                             names, puts, deletes)
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
        base = self._base + index * self._block
        return _NodeNet(base, self._block, self.node_prefix, _int_to_ip(base + 1))

    def _subnet_doc(self, node: str, index: int) -> dict[str, Any]:
        net = self._node_net(index)
        return {"node": node, "subnet": f"{_int_to_ip(net.base)}/{net.prefix}", "gateway": net.gateway}

    def _allocate_addresses(
        self,
        existing: list[tuple[str, Any]],
        placements: dict[str, Any],
        subnets: dict[str, _NodeNet],
        puts: dict[str, Any],
        deletes: set[str],
    ) -> None:
        """Addresses node by node: each node's depend only on its subnet, its placements and their
        address documents, so a node whose inputs are those of its last no-change run is skipped
        (a memo that never alters a result)."""
        placed: dict[str, dict[str, Any]] = defaultdict(dict)  # node → {name: placement}
        for name, placement in placements.items():
            if placement.get("node") in subnets:
                placed[placement["node"]][name] = placement
        current: dict[str, Any] = {}
        for key, doc in existing:
            placement = placements.get(key[len(ADDRESSES):])
            if placement is None or placement.get("node") not in subnets:
                deletes.add(key)  # unplaced, or on a node without a subnet
            else:
                current[key[len(ADDRESSES):]] = doc
        settled: dict[str, tuple[Any, ...]] = {}
        for node, on_node in placed.items():
            inputs = (subnets[node], on_node, {n: current[n] for n in on_node if n in current})
            if self._settled.get(node) == inputs:
                settled[node] = inputs
                continue
            changes_before = len(puts) + len(deletes)
            self._allocate_node(node, *inputs, puts, deletes)
            if len(puts) + len(deletes) == changes_before:
                settled[node] = inputs
        self._settled = settled

    def _allocate_node(
        self,
        node: str,
        subnet: _NodeNet,
        on_node: dict[str, Any],
        docs: dict[str, Any],
        puts: dict[str, Any],
        deletes: set[str],
    ) -> None:
        used: set[int] = set()
        kept: set[str] = set()
        for name in sorted(docs):  # in name order: on a duplicate, the first name keeps the address
            doc = docs[name]
            offset = self._offset(doc.get("ip"), subnet) if doc.get("node") == node else None
            if offset is None or offset in used:
                deletes.add(ADDRESSES + name)  # moved here, outside the subnet, or a duplicate
                continue
            used.add(offset)
            kept.add(name)
            want = self._address_doc(on_node[name], subnet, offset)
            if doc != want:
                puts[ADDRESSES + name] = want
        for name in sorted(on_node.keys() - kept):
            offset = next((o for o in range(2, subnet.size - 1) if o not in used), None)
            if offset is None:
                continue  # the node's subnet is full; the instance waits without an address
            used.add(offset)
            deletes.discard(ADDRESSES + name)
            puts[ADDRESSES + name] = self._address_doc(on_node[name], subnet, offset)

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
