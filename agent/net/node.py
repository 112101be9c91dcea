"""Container networking on one node: a bridge holding the subnet's gateway, a network namespace and
veth per container with its address and a default route, and the node's NAT table.

The network controller allocates the subnet and addresses; this layer takes them as inputs.
Everything it creates carries the bridge name (`<bridge>-<hash>` namespaces, `v<hash>` veths,
`cca_nat_<bridge>` table, records in `<state>/net/<bridge>/`), so `teardown` removes it all.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from ccattler.agent.net import nat, netns
from ccattler.agent.net.netns import NETNS_DIR
from ccattler.engine.facts import CcaError


class NetworkError(CcaError):
    """Setting up the node or a container's network failed."""


@dataclass(frozen=True, slots=True)
class Attachment:
    """One container's network: its namespace, host-side veth and address."""

    name: str
    ip: str
    netns: str
    veth: str

    @property
    def netns_path(self) -> str:
        return str(NETNS_DIR / self.netns)


class NodeNetwork:
    """The bridge `bridge` with gateway = first address of `subnet`, and the containers on it."""

    def __init__(self, subnet: str, state_dir: Path | str, bridge: str = "cca0",
                 no_masquerade: tuple[str, ...] = ()):
        if len(bridge) > 10:
            raise NetworkError(f"bridge name {bridge!r} is longer than 10 characters")
        try:
            self.subnet = ipaddress.ip_network(subnet)
        except ValueError as exc:
            raise NetworkError(f"node subnet {subnet!r} is not a network: {exc}") from None
        if self.subnet.version != 4 or self.subnet.num_addresses < 4:
            raise NetworkError(f"node subnet {subnet} must be IPv4 with room for a gateway and hosts")
        self.gateway = str(next(self.subnet.hosts()))
        self.bridge = bridge
        self.no_masquerade = no_masquerade
        self.records = Path(state_dir) / "net" / bridge
        self.records.mkdir(parents=True, exist_ok=True)
        self._ipr = IPRoute()
        self._lock = threading.Lock()

    # -- the node ------------------------------------------------------------------------------
    @classmethod
    def recorded(cls, state_dir: Path | str, bridge: str = "cca0") -> NodeNetwork | None:
        """The network a previous `setup` on this state dir left (to tear it down), if any."""
        try:
            subnet = (Path(state_dir) / "net" / bridge / "subnet").read_text().strip()
        except FileNotFoundError:
            return None
        return cls(subnet, state_dir, bridge)

    def setup(self) -> None:
        """Create the bridge, its gateway address and the NAT table (idempotent)."""
        (self.records / "subnet").write_text(f"{self.subnet}\n")  # first: `recorded` finds what follows
        with self._lock:
            index = self._index(self.bridge)
            if index is None:
                self._ipr.link("add", ifname=self.bridge, kind="bridge")
                index = self._index(self.bridge)
            have = {(a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in self._ipr.get_addr(index=index)}
            if (self.gateway, self.subnet.prefixlen) not in have:
                self._ipr.addr("add", index=index, address=self.gateway, prefixlen=self.subnet.prefixlen)
            self._ipr.link("set", index=index, state="up")
            Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")  # masquerade needs forwarding
            nat.install(self.bridge, str(self.subnet), self.no_masquerade)

    def teardown(self) -> None:
        """Remove every container network, the bridge and the NAT table: every step is tried, and
        what could not be removed is raised at the end, all of it in one NetworkError."""
        problems: list[str] = []
        for name in list(self.attachments()):
            _attempt(problems, f"container network {name}", self.detach, name)
        for ns in self._own_namespaces():
            _attempt(problems, f"namespace {ns}", _remove_netns, ns)

        def bridge_and_nat() -> None:
            with self._lock:
                index = self._index(self.bridge)
                if index is not None:
                    self._ipr.link("del", index=index)
                nat.remove(self.bridge)

        _attempt(problems, f"bridge {self.bridge} and its NAT table", bridge_and_nat)
        if problems:
            raise NetworkError("; ".join(problems))
        (self.records / "subnet").unlink(missing_ok=True)  # kept while something is left: retried

    def close(self) -> None:
        self._ipr.close()

    # -- containers ----------------------------------------------------------------------------
    def attach(self, name: str, ip: str) -> Attachment:
        """Give container `name` a namespace and veth with `ip` (idempotent for the same ip)."""
        self._check_ip(name, ip)
        existing = self._record(name)
        if existing and existing.ip == ip and (NETNS_DIR / existing.netns).exists() \
                and self._index(existing.veth) is not None:
            return existing
        if existing:
            self.detach(name)
        token = self._token(name)
        att = Attachment(name, ip, f"{self.bridge}-{token[:12]}", f"v{token[:11]}")
        self._write_record(att)
        try:
            self._plumb(att)
        except (NetlinkError, OSError) as exc:
            self.detach(name)
            raise NetworkError(f"network for {name} ({ip}): {exc}") from None
        return att

    def detach(self, name: str) -> None:
        """Remove the veth and namespace of `name` (no-op if absent)."""
        att = self._record(name)
        if att is None:
            return
        with self._lock:
            index = self._index(att.veth)
            if index is not None:
                try:
                    self._ipr.link("del", index=index)
                except NetlinkError:
                    pass  # gone with its namespace already
        _remove_netns(att.netns)
        (self.records / f"{att.netns}.json").unlink(missing_ok=True)

    def attachments(self) -> dict[str, Attachment]:
        """name → attachment for every container network recorded on this bridge."""
        found = {}
        for path in self.records.glob("*.json"):
            if (att := self._read_record(path)) is not None:
                found[att.name] = att
        return found

    def gc(self, keep: set[str]) -> list[str]:
        """Detach every container not in `keep`, and drop namespaces nobody recorded."""
        gone = [name for name in self.attachments() if name not in keep]
        for name in gone:
            self.detach(name)
        recorded = {a.netns for a in self.attachments().values()}
        for ns in self._own_namespaces() - recorded:
            _remove_netns(ns)
        return gone

    # -- internals -----------------------------------------------------------------------------
    def _plumb(self, att: Attachment) -> None:
        if (NETNS_DIR / att.netns).exists():
            _remove_netns(att.netns)
        path = netns.create(att.netns)
        with self._lock:  # the host-side netlink socket is shared
            if (old := self._index(att.veth)) is not None:
                self._ipr.link("del", index=old)
            bridge = self._index(self.bridge)
            if bridge is None:
                raise NetworkError(f"bridge {self.bridge} does not exist (setup() was not run)")
            peer = {"ifname": "eth0", "net_ns_fd": str(path)}
            self._ipr.link("add", ifname=att.veth, kind="veth", peer=peer)
            self._ipr.link("set", index=self._index(att.veth), master=bridge, state="up")
            # hairpin: a container reaching its own service VIP is DNATed back out of this port
            self._ipr.brport("set", index=self._index(att.veth), mode=1)
        netns.run_in(att.netns, lambda: self._configure_inside(att))

    def _configure_inside(self, att: Attachment) -> None:
        """Runs on a thread inside the container's namespace: a socket opened here talks to it."""
        with IPRoute() as ns:
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
            eth = ns.link_lookup(ifname="eth0")[0]
            ns.addr("add", index=eth, address=att.ip, prefixlen=self.subnet.prefixlen)
            ns.link("set", index=eth, state="up")
            ns.route("add", dst="default", gateway=self.gateway)

    def _check_ip(self, name: str, ip: str) -> None:
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            raise NetworkError(f"address {ip!r} of {name} is not an IP address") from None
        if addr not in self.subnet or str(addr) == self.gateway or addr in (
                self.subnet.network_address, self.subnet.broadcast_address):
            raise NetworkError(f"address {ip} of {name} is not a host address of subnet {self.subnet} "
                               f"(other than the gateway {self.gateway})")

    def _index(self, ifname: str) -> int | None:
        found = self._ipr.link_lookup(ifname=ifname)
        return found[0] if found else None

    def _token(self, name: str) -> str:
        return hashlib.sha256(f"{self.bridge}/{name}".encode()).hexdigest()

    def _record(self, name: str) -> Attachment | None:
        """The record of `name` (its file is named after its namespace, itself a hash of the name)."""
        att = self._read_record(self.records / f"{self.bridge}-{self._token(name)[:12]}.json")
        return att if att is not None and att.name == name else None

    @staticmethod
    def _read_record(path: Path) -> Attachment | None:
        try:
            return Attachment(**json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)  # a torn write: the namespace is collected by gc()
            return None

    def _write_record(self, att: Attachment) -> None:
        path = self.records / f"{att.netns}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"name": att.name, "ip": att.ip, "netns": att.netns, "veth": att.veth}))
        os.replace(tmp, path)

    def _own_namespaces(self) -> set[str]:
        if not NETNS_DIR.is_dir():
            return set()
        return {p.name for p in NETNS_DIR.iterdir() if p.name.startswith(f"{self.bridge}-")}


def _attempt(problems: list[str], what: str, step: Callable[..., object], *args: object) -> None:
    """Run one clean-up step; a failure is noted in `problems` and the next step still runs."""
    try:
        step(*args)
    except (OSError, NetlinkError, CcaError) as exc:
        problems.append(f"{what}: {exc}")


def _remove_netns(name: str) -> None:
    try:
        netns.remove(name)
    except OSError as exc:
        raise NetworkError(f"cannot remove network namespace {name}: {exc}") from None
