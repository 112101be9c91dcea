"""Service names, the network controller's fourth job: `derived/dns/<tenant>/<service>` holds the
records every node's resolver serves for that service (agent/dns/, docs/facts.md):

    <service>.<tenant>.cca.local                A    the VIP (without one: every ordinal's address)
    <service>-<n>.<service>.<tenant>.cca.local  A    a stateful ordinal's address
    _<port>._<proto>.<service>.<tenant>.cca.local SRV  0 100 <port> <service>.<tenant>.cca.local

The language has no port names, so an SRV name carries the port number (`_8080._tcp.web…`).
A service gets a document when it has a VIP or is stateful with an addressed ordinal; a service or
tenant name that is no DNS label (letters, digits, `-`, at most 63) gets a document with `error`
and no records, which `cca describe service` shows. Pure over the VIPs, the services and the
instance addresses as this run leaves them; a memo skips a run whose inputs are the same objects as
a run that changed nothing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ccattler.engine.controllers.vip import DNS_ZONE
from ccattler.engine.facts.keys import DNS

#: Seconds resolvers (and the clients behind them) may keep an answer: short, as CoreDNS's default.
TTL = 5
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")


def _label_error(what: str, name: str) -> str | None:
    if _LABEL.match(name.lower()):
        return None
    return (f"{what} name {name!r} is not a DNS label (letters, digits and '-', at most 63, "
            "not starting or ending with '-'): it has no DNS name")


def service_name(tenant: str, service: str) -> str:
    """`web`, `default` → `web.default.cca.local` (lower case: DNS names are case-blind)."""
    return f"{service}.{tenant}.{DNS_ZONE}".lower()


def _ordinal(instance: str, service: str) -> int | None:
    suffix = instance[len(service) + 1:] if instance.startswith(service + "-") else ""
    return int(suffix) if suffix.isdigit() else None


def dns_document(full: str, service: Mapping[str, Any], vip: Any,
                 ordinals: Mapping[int, tuple[str, str]]) -> dict[str, Any] | None:
    """The `derived/dns` document of service `full` (`tenant/name`), or None when it has no name to
    serve. `vip`: its `derived/vip` document or None; `ordinals`: n → (instance, address)."""
    tenant, _, name = full.partition("/")
    vip_ip = vip.get("ip") if isinstance(vip, Mapping) else None
    stateful = bool(service.get("stateful"))
    if not vip_ip and not (stateful and ordinals):
        return None
    doc: dict[str, Any] = {"service": full, "name": None, "ttl": TTL, "records": []}
    error = _label_error("tenant", tenant) or _label_error("service", name)
    if error:
        return doc | {"error": error}
    base = service_name(tenant, name)
    records: list[dict[str, Any]] = []
    if vip_ip:
        records.append({"name": base, "type": "A", "address": vip_ip})
    else:  # headless: the name answers every ordinal's address
        records += [{"name": base, "type": "A", "address": ip} for _, (_, ip) in sorted(ordinals.items())]
    if stateful:
        records += [{"name": f"{instance}.{base}".lower(), "type": "A", "address": ip}
                    for _, (instance, ip) in sorted(ordinals.items())]
    if vip_ip:
        for port in vip.get("ports") or []:
            if isinstance(port, Mapping) and isinstance(port.get("port"), int):
                proto = "udp" if port.get("protocol") == "udp" else "tcp"
                records.append({"name": f"_{port['port']}._{proto}.{base}", "type": "SRV",
                                "priority": 0, "weight": 100, "port": port["port"], "target": base})
    return doc | {"name": base, "records": records}


class DnsNames:
    """Keeps `derived/dns/` in step with the VIPs, the services and the instance addresses."""

    def __init__(self) -> None:
        self._memo: tuple[dict[str, int], ...] | None = None

    def reconcile(self, services: Mapping[str, Any], vips: Mapping[str, Any], addresses: Mapping[str, Any],
                  names: Mapping[str, Any], puts: dict[str, Any], deletes: set[str]) -> None:
        """`services`, `vips`, `names`: tenant/service → document; `addresses`: tenant/instance →
        `derived/network/ip` document — each as this run leaves it."""
        memo = tuple({k: id(v) for k, v in m.items()} for m in (services, vips, addresses, names))
        if memo == self._memo:
            return
        before = len(puts) + len(deletes)
        ordinals: dict[str, dict[int, tuple[str, str]]] = defaultdict(dict)
        for key, doc in addresses.items():
            if not isinstance(doc, Mapping) or not isinstance(doc.get("ip"), str):
                continue
            tenant, _, instance = key.partition("/")
            owner = str(doc.get("service") or "")
            full = owner if "/" in owner else f"{tenant}/{owner}"
            svc = services.get(full)
            if isinstance(svc, Mapping) and svc.get("stateful"):
                n = _ordinal(instance, full.partition("/")[2])
                if n is not None:
                    ordinals[full][n] = (instance, doc["ip"])
        wanted: dict[str, dict[str, Any]] = {}
        claimed: dict[str, str] = {}  # name → the service that has it (case-blind duplicates)
        for full in sorted(set(vips) | set(ordinals)):
            svc = services.get(full)
            if not isinstance(svc, Mapping):
                continue
            doc = dns_document(full, svc, vips.get(full), ordinals.get(full, {}))
            if doc is None:
                continue
            if doc["name"] in claimed:
                doc = {**doc, "name": None, "records": [],
                       "error": f"its DNS name {doc['name']} is taken by {claimed[doc['name']]}"}
            elif doc["name"]:
                claimed[doc["name"]] = full
            wanted[full] = doc
        for full in names.keys() - wanted.keys():
            deletes.add(DNS + full)
        for full, doc in wanted.items():
            if names.get(full) != doc:
                puts[DNS + full] = doc
        self._memo = memo if len(puts) + len(deletes) == before else None
