"""Service virtual IPs, the network controller's third job: every service that exposes a port gets a
stable address from the service range at `derived/vip/<tenant>/<service>` (docs/facts.md).

Pure over the snapshot: an existing VIP document keeps its address while its service exposes a
port and the address is inside the range and not taken by a name sorting earlier (so restarts and
failovers change nothing); new services take the lowest free address in name order; a service that
is gone or exposes nothing loses its document. The knob is `service_cidr` (default 10.96.0.0/16,
apart from the default cluster CIDR 10.88.0.0/16 so a VIP is never an instance address).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from ccattler.engine.facts import CcaError, service_doc
from ccattler.engine.facts.keys import VIPS

DEFAULT_SERVICE_CIDR = "10.96.0.0/16"
DNS_ZONE = "cca.local"


class InvalidServiceRange(CcaError):
    """The service CIDR cannot be used (not IPv4, too small, or overlapping the cluster CIDR)."""


def dns_name(full: str) -> str:
    """`tenant/service` → `service.tenant.cca.local`."""
    tenant, _, name = full.partition("/")
    return f"{name}.{tenant}.{DNS_ZONE}"


def exposed_ports(service: Any) -> list[dict[str, Any]]:
    """The service's `expose` entries as `{"port", "protocol", "external"}`, sorted."""
    ports = []
    for entry in service_doc.expose(service) if isinstance(service, dict) else []:
        if isinstance(entry, dict) and isinstance(entry.get("port"), int):
            ports.append({"port": entry["port"], "protocol": entry.get("protocol") or "tcp",
                          "external": bool(entry.get("external"))})
    return sorted(ports, key=lambda p: (p["port"], p["protocol"]))


class VipAllocator:
    """Keeps `derived/vip/` in step with the declared services."""

    def __init__(self, service_cidr: str = DEFAULT_SERVICE_CIDR, cluster_cidr: str | None = None) -> None:
        try:
            self.range = ipaddress.IPv4Network(service_cidr)
        except ValueError as exc:
            raise InvalidServiceRange(
                f"service CIDR {service_cidr!r} is not an IPv4 network: {exc}") from None
        if self.range.prefixlen > 30:
            raise InvalidServiceRange(f"service CIDR {service_cidr} is too small (at most /30)")
        if cluster_cidr and self.range.overlaps(ipaddress.IPv4Network(cluster_cidr)):
            raise InvalidServiceRange(f"service CIDR {service_cidr} overlaps the cluster CIDR {cluster_cidr}")
        self._base = int(self.range.network_address)
        self._size = self.range.num_addresses
        self._memo: tuple[dict[str, int], dict[str, int]] | None = None  # ids of the last settled inputs

    def reconcile(self, services: Mapping[str, Any], vips: Mapping[str, Any],
                  puts: dict[str, Any], deletes: set[str]) -> None:
        """`services`: tenant/name → service document; `vips`: tenant/name → VIP document."""
        memo = ({k: id(v) for k, v in services.items()}, {k: id(v) for k, v in vips.items()})
        if memo == self._memo:
            return  # the same objects as a run that changed nothing: the same (empty) result
        before = len(puts) + len(deletes)
        wanted = {name: ports for name, doc in services.items() if (ports := exposed_ports(doc))}
        used: set[int] = set()
        kept: dict[str, int] = {}
        for name in sorted(vips):
            offset = self._offset(vips[name].get("ip") if isinstance(vips[name], dict) else None)
            if name not in wanted or offset is None or offset in used:
                deletes.add(VIPS + name)  # gone, outside the range, or a duplicate
                continue
            used.add(offset)
            kept[name] = offset
        free = (o for o in range(1, self._size - 1) if o not in used)
        for name in sorted(wanted.keys() - kept.keys()):
            offset = next(free, None)
            if offset is None:
                break  # the range is full: these services wait without a VIP
            kept[name] = offset
            deletes.discard(VIPS + name)
        for name, offset in kept.items():
            doc = self._doc(name, offset, wanted[name], counted(services[name]))
            if vips.get(name) != doc:
                puts[VIPS + name] = doc
        self._memo = memo if len(puts) + len(deletes) == before else None

    def _offset(self, ip: object) -> int | None:
        try:
            address = int(ipaddress.IPv4Address(ip)) if isinstance(ip, str) else None
        except ValueError:
            return None
        if address is None:
            return None
        offset = address - self._base
        return offset if 1 <= offset < self._size - 1 else None

    def _doc(self, name: str, offset: int, ports: list[dict[str, Any]], count: bool) -> dict[str, Any]:
        ip = str(ipaddress.IPv4Address(self._base + offset))
        doc = {"service": name, "ip": ip, "range": str(self.range), "dns": dns_name(name), "ports": ports}
        if count:
            doc["count"] = "requests_per_second"
        return doc


def counted(service: Any) -> bool:
    """Whether the nodes count new connections to the service's VIP: it scales on
    `requests_per_second` (agent/service_metrics.py; a gate's requests are counted at the gate)."""
    horizontal = service_doc.horizontal(service) if isinstance(service, dict) else {}
    return any(isinstance(t, dict) and t.get("metric") == "requests_per_second"
               for t in horizontal.get("targets") or ())
