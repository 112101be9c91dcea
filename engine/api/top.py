"""What `cca top` shows: the usage agents publish in `observed/instance/...` (agent/telemetry.py),
per instance beside its request, and summed per node beside the node's capacity."""

from __future__ import annotations

from typing import Any

from ccattler.engine.facts import derived_instance, observed_instance, service_doc
from ccattler.engine.facts.keys import (
    DESIRED_SERVICES,
    INSTANCES,
    OBSERVED_INSTANCES,
    OBSERVED_NODES,
)
from ccattler.engine.store import Store


def _prefix(root: str, tenant: str | None) -> str:
    return f"{root}{tenant}/" if tenant else root


def workloads(store: Store, tenant: str | None, tags: dict[str, str]) -> list[dict[str, Any]]:
    """One row per instance: where it runs, its state, and cpu/memory/pids used and requested."""
    facts, revision = store.range(_prefix(INSTANCES, tenant))
    services = {f.key.removeprefix(DESIRED_SERVICES): f.value
                for f in store.range(_prefix(DESIRED_SERVICES, tenant), revision)[0]}
    observed = {f.key.removeprefix(OBSERVED_INSTANCES): f.value
                for f in store.range(_prefix(OBSERVED_INSTANCES, tenant), revision)[0]}
    rows = []
    for fact in facts:
        t, service, instance = fact.key.split("/")[2:5]
        spec = services.get(f"{t}/{service}") or {}
        if any(service_doc.tags(spec).get(k) != v for k, v in tags.items()):
            continue
        seen = observed.get(f"{t}/{instance}") or {}
        usage = observed_instance.usage(seen)
        requested = derived_instance.resources(fact.value) or service_doc.resources(spec)
        rows.append({"tenant": t, "name": instance, "service": f"{t}/{service}", "node": seen.get("node"),
                     "state": seen.get("state", "pending"), "cpu": usage.get("cpu"),
                     "memory": usage.get("memory"), "pids": usage.get("pids"),
                     "cpu_request": requested.get("cpu", 0), "memory_request": requested.get("memory", 0)})
    return rows


def nodes(store: Store) -> list[dict[str, Any]]:
    """One row per live node: capacity, the usage of its instances summed, and how many run."""
    facts, revision = store.range(OBSERVED_NODES)
    per_node: dict[str, dict[str, int]] = {}
    for fact in store.range(OBSERVED_INSTANCES, revision)[0]:
        doc = fact.value
        usage = observed_instance.usage(doc)
        totals = per_node.setdefault(str(doc.get("node")), {"cpu": 0, "memory": 0, "pids": 0, "instances": 0})
        totals["instances"] += doc.get("state") == "running"
        for field in ("cpu", "memory", "pids"):
            totals[field] += int(usage.get(field) or 0)
    rows = []
    for fact in facts:
        node = fact.key.removeprefix(OBSERVED_NODES)
        capacity = fact.value.get("capacity") or {}
        used = per_node.get(node, {"cpu": 0, "memory": 0, "pids": 0, "instances": 0})
        rows.append({"name": node, **used, "cpu_capacity": capacity.get("cpu", 0),
                     "memory_capacity": capacity.get("memory", 0)})
    return rows
