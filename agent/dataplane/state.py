"""A node's slice of facts → the `DataPlaneState` its data plane enforces (agent/dataplane/base.py).

Read from the slice (engine/api/slice.py shares these with every node):

    derived/vip/<tenant>/<service>       {"ip", "ports": [{"port", "protocol", "external"}]}
    derived/endpoint/<tenant>/<service>  {"endpoints": [{"instance", "node", "ip"}]}  (ready ones)
    derived/firewall/<node>              this node's policy document (policy_state.py)

Every exposed port of a VIP is a frontend balanced over the service's ready endpoints (the backend
listens on the exposed port itself); endpoints without an address (process runtime) are skipped, and
a VIP without any ready endpoint is kept with no backends, so the plane refuses at once. `expose N
external` ports are also node ports (`Frontend("", N)`). `http` exposes are TCP at this layer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend
from ccattler.agent.dataplane.policy_state import policy_state

VIPS = "derived/vip/"
ENDPOINTS = "derived/endpoint/"
FIREWALL = "derived/firewall/"


def _protocol(raw: Any) -> str:
    return "udp" if raw == "udp" else "tcp"


def _address(raw: Any) -> str | None:
    try:
        return str(ipaddress.IPv4Address(raw)) if isinstance(raw, str) else None
    except ValueError:
        return None


def _backends(doc: Any, port: int) -> tuple[Backend, ...]:
    if not isinstance(doc, Mapping):
        return ()
    found = set()
    for entry in doc.get("endpoints") or []:
        if isinstance(entry, Mapping) and (ip := _address(entry.get("ip"))):
            found.add(Backend(ip, port, str(entry.get("node") or ""), str(entry.get("instance") or "")))
    return tuple(sorted(found))


def keys_under(facts: Mapping[str, Any], prefix: str) -> list[str]:
    """The slice's keys under `prefix`, sorted — those still held as JSON text too (agent
    `SliceFacts.raw`: shared documents are decoded only when read, and iteration skips them)."""
    raw = getattr(facts, "raw", {})
    return sorted({k for k in facts if k.startswith(prefix)} | {k for k in raw if k.startswith(prefix)})


def service_range(facts: Mapping[str, Any]) -> str | None:
    """The service CIDR the VIPs come from (every VIP document carries it), or None without VIPs."""
    for key in keys_under(facts, VIPS):
        doc = facts.get(key)
        if isinstance(doc, Mapping) and isinstance(doc.get("range"), str):
            return doc["range"]
    return None


def dataplane_state(facts: Mapping[str, Any], node: str) -> DataPlaneState:
    """What `node`'s kernel should enforce, from its slice `facts` (key → document). Malformed
    documents contribute nothing rather than failing the whole node."""
    services: dict[Frontend, tuple[Backend, ...]] = {}
    external: dict[Frontend, tuple[Backend, ...]] = {}
    for key in keys_under(facts, VIPS):
        vip = facts.get(key)
        if not isinstance(vip, Mapping):
            continue
        ip = _address(vip.get("ip"))
        if ip is None:
            continue
        endpoints = facts.get(ENDPOINTS + key[len(VIPS):])
        for entry in vip.get("ports") or []:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("port"), int):
                continue
            port, protocol = entry["port"], _protocol(entry.get("protocol"))
            backends = _backends(endpoints, port)
            services[Frontend(ip, port, protocol)] = backends
            if entry.get("external"):
                # admission refuses two services on one external port; the first name wins otherwise
                external.setdefault(Frontend("", port, protocol), backends)
    identities, policies = policy_state(facts.get(FIREWALL + node))
    return DataPlaneState(services=services, external=external, identities=identities, policies=policies)
