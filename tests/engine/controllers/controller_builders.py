"""Builders for controller tests (importable as `controller_builders`): documents in the shapes of
docs/facts.md, snapshots, applying change sets to a dict the way a store would. The `World` holds
documents frozen, as the runner's snapshots hand them out: a controller that mutates one fails."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from ccattler.engine.facts.frozen import freeze
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot


def service(name: str = "web", tenant: str = "default", **fields: Any) -> tuple[str, dict]:
    doc = {
        "kind": "service", "tenant": tenant, "name": name, "source": "test.cca",
        "image": "busybox", "instances": 1, "command": None, "expose": [],
        "resources": {"cpu": 100, "memory": 64 << 20}, "env": {}, "config": {"env": {}, "files": []},
        "secrets": [], "connections": [], "volumes": [], "stateful": False, "owner": None, "tags": {},
        "init": [], "probes": {"liveness": None, "startup": None, "readiness": None},
        "placement": {"require": [], "prefer": [], "accept": [], "zone": None, "zone_spread": False,
                      "architecture": None, "colocate": [], "separate": []},
        "update": {"max_unavailable": 1, "max_extra": 1},
        "disruption": {"min_available": None, "max_unavailable": None}, "scale": None, "group": None,
    }
    doc.update(fields)
    return f"desired/service/{tenant}/{name}", doc


def node(name: str, **fields: Any) -> tuple[str, dict]:
    doc = {"capacity": {"cpu": 4000, "memory": 8 << 30}, "labels": {}, "zone": None,
           "architecture": "amd64", "restrictions": [], "address": "192.0.2.1"}
    doc.update(fields)
    return f"observed/node/{name}", doc


def placement(instance: str, node_name: str, service_name: str = "web", tenant: str = "default"):
    return f"derived/placement/{tenant}/{instance}", {
        "service": f"{tenant}/{service_name}", "instance": instance, "node": node_name,
        "revision": 1, "score": 0,
    }


class World:
    """A dict standing in for the store: revisions bump per applied change set, like a txn."""

    def __init__(self, *facts: tuple[str, Any]) -> None:
        self.revision = 1
        self.values: dict[str, Any] = {k: freeze(v) for k, v in facts}
        self.mods: dict[str, int] = {k: 1 for k in self.values}

    def put(self, key: str, value: Any) -> None:
        self.revision += 1
        self.values[key] = freeze(value)
        self.mods[key] = self.revision

    def delete(self, key: str) -> None:
        self.revision += 1
        self.values.pop(key, None)
        self.mods.pop(key, None)

    def snapshot(self) -> Snapshot:
        return Snapshot(self.revision, MappingProxyType(dict(self.values)), MappingProxyType(dict(self.mods)))

    def apply(self, changes: ChangeSet) -> None:
        self.revision += 1
        for key in changes.deletes:
            self.values.pop(key, None)
            self.mods.pop(key, None)
        for key, value in changes.puts.items():
            self.values[key] = freeze(value)
            self.mods[key] = self.revision

    def under(self, prefix: str) -> dict[str, Any]:
        return {k: v for k, v in sorted(self.values.items()) if k.startswith(prefix)}

