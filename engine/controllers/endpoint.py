"""The endpoint controller: the ready instances of each service and its ports →
`derived/endpoint/<tenant>/<service>` (what VIPs, gates and DNS consume).

An instance is an endpoint when it is placed on a node and that node's agent reports it `running`
and `ready` (readiness probe passed; a service without one is ready when running). Its `ip` is null
under the process runtime (no own address): traffic consumers skip those, ordering (stateful
services start an ordinal once the previous one is an endpoint) does not. A document is rewritten
only when its content changes; services that are gone lose theirs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ccattler.engine.controllers.base import ChangeSet, Snapshot

SERVICES = "desired/service/"
PLACEMENTS = "derived/placement/"
OBSERVED = "observed/instance/"
ENDPOINTS = "derived/endpoint/"


def _ports(service: dict[str, Any]) -> list[dict[str, Any]]:
    ports = [{"port": e.get("port"), "protocol": e.get("protocol") or "tcp"}
             for e in service.get("expose") or [] if isinstance(e, dict) and isinstance(e.get("port"), int)]
    return sorted(ports, key=lambda p: (p["port"], p["protocol"]))


class EndpointController:
    """Writes one endpoint document per declared service."""

    name: ClassVar[str] = "endpoint"
    reads: ClassVar[tuple[str, ...]] = (SERVICES, PLACEMENTS, OBSERVED, ENDPOINTS)
    writes: ClassVar[tuple[str, ...]] = (ENDPOINTS,)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        ready: dict[str, list[dict[str, Any]]] = {}
        for key, placement in snapshot.under(PLACEMENTS):
            tenant, instance = key.split("/")[2], key.split("/")[3]
            node = placement.get("node") if isinstance(placement, dict) else None
            seen = snapshot.get(f"{OBSERVED}{tenant}/{instance}")
            if not node or not isinstance(seen, dict) or seen.get("node") != node:
                continue  # unplaced, not reported yet, or still reported by the node it left
            if seen.get("state") == "running" and seen.get("ready"):
                ready.setdefault(str(placement.get("service")), []).append(
                    {"instance": instance, "node": node, "ip": seen.get("ip")})
        puts: dict[str, Any] = {}
        wanted = set()
        for key, service in snapshot.under(SERVICES):
            tenant, name = key.split("/")[2], key.split("/")[3]
            full = f"{tenant}/{name}"
            target = f"{ENDPOINTS}{full}"
            wanted.add(target)
            doc = {"service": full, "ports": _ports(service if isinstance(service, dict) else {}),
                   "endpoints": sorted(ready.get(full, []), key=lambda e: e["instance"])}
            if snapshot.get(target) != doc:
                puts[target] = doc
        deletes = frozenset(key for key, _ in snapshot.under(ENDPOINTS) if key not in wanted)
        return ChangeSet(puts, deletes)
