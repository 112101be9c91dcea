"""Document builders in the shapes of docs/facts.md (nodes, services), for tests and benchmarks."""

from __future__ import annotations

from ccattler.engine.facts.keys import DESIRED_SERVICES, OBSERVED_NODES

GI = 1024**3
MI = 1024**2


def node(name, cpu=8, memory=32 * GI, zone=None, labels=None, restrict=(), arch="amd64"):
    """An `observed/node/<name>` fact; cpu in cores, memory in bytes."""
    return f"{OBSERVED_NODES}{name}", {
        "capacity": {"cpu": int(cpu * 1000), "memory": memory}, "labels": dict(labels or {}),
        "zone": zone, "architecture": arch, "restrictions": list(restrict), "address": "10.0.0.1",
    }


def service(name, instances=1, cpu=1, memory=1 * GI, tenant="default", group=None, **placement):
    """A `desired/service/<tenant>/<name>` fact; `placement` keys override the placement block."""
    doc = {
        "kind": "service", "tenant": tenant, "name": name, "source": "t.cca", "image": "busybox",
        "instances": instances, "command": None, "expose": [], "resources": {"cpu": int(cpu * 1000),
        "memory": memory}, "env": {}, "config": {"env": {}, "files": []}, "secrets": [],
        "connections": [], "volumes": [], "stateful": False, "owner": None, "tags": {}, "init": [],
        "probes": {"liveness": None, "startup": None, "readiness": None},
        "placement": {"require": [], "prefer": [], "accept": [], "zone": None, "zone_spread": False,
                      "architecture": None, "colocate": [], "separate": []},
        "update": {"max_unavailable": 1, "max_extra": 1}, "disruption": None, "scale": None,
        "group": group,
    }
    for key, value in placement.items():
        doc["placement"][key] = value
    return f"{DESIRED_SERVICES}{tenant}/{name}", doc
