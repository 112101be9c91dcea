"""Read views for `get`, `describe`, `status` and `events`: store facts joined into rows a table or
`-o json` can show (instances with their placement and observed state, nodes with their condition,
secrets as metadata only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.engine.admission.capabilities import object_kind
from ccattler.engine.admission.vocabulary import committed_instances, effective_quota
from ccattler.engine.api.errors import BadRequest
from ccattler.engine.autoscale.effective import effective_service
from ccattler.engine.facts import DEFAULT_TENANT, NAMESPACED_KINDS, CcaError, derived_instance
from ccattler.engine.facts.keys import (
    DERIVED,
    DESIRED,
    DESIRED_LP,
    DESIRED_NODES,
    DESIRED_POLICIES,
    DESIRED_SECRETS,
    DESIRED_SERVICES,
    DESIRED_TENANTS,
    DNS,
    DRAINS,
    ENDPOINTS,
    INSTANCES,
    LEADER_RUNNER,
    NETPOLICY_STATUS,
    NODE_CONDITIONS,
    NODE_INTENT,
    OBSERVED,
    OBSERVED_INSTANCES,
    OBSERVED_NODES,
    PLACEMENTS,
    ROLLOUTS,
    SCALE,
    SECRETS,
    VIPS,
)
from ccattler.engine.store import Store

#: Kinds with a joined view; every other kind word lists its desired/ documents.
VIEW_KINDS = ("services", "instances", "nodes", "secrets", "policies", "events")
_ALIASES = {"service": "services", "svc": "services", "instance": "instances", "inst": "instances",
            "node": "nodes", "secret": "secrets", "policy": "policies", "event": "events"}
EVENT_HISTORY = 200


def view_kind(word: str) -> str:
    """`services`, `instances`, … or the object kind a word names; `BadRequest` when unknown."""
    word = word.strip().lower()
    if word in VIEW_KINDS or word in _ALIASES:
        return _ALIASES.get(word, word)
    try:
        return object_kind(word)
    except CcaError:
        import difflib

        from ccattler.engine.admission.capabilities import KIND_WORDS

        words = sorted({*VIEW_KINDS, *_ALIASES, *KIND_WORDS})
        close = difflib.get_close_matches(word, words, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        known = ", ".join(sorted({*VIEW_KINDS, *(k for k in KIND_WORDS if k.endswith("s") and k != "lps")}))
        raise BadRequest(f"unknown kind {word!r}{hint} (kinds: {known})") from None


def _tenant_prefix(base: str, tenant: str | None) -> str:
    return base if tenant is None else f"{base}{tenant}/"


def _tags_match(doc: Mapping[str, Any], tags: Mapping[str, str]) -> bool:
    have = doc.get("tags") or {}
    return all(str(have.get(k)) == v for k, v in tags.items())


def _row(key: str, value: Any, **extra: Any) -> dict[str, Any]:
    parts = key.split("/")
    tenant = parts[-2] if len(parts) >= 4 else None
    return {"key": key, "name": parts[-1], "tenant": tenant, "value": value} | extra


def services(store: Store, tenant: str | None, tags: Mapping[str, str]) -> list[dict[str, Any]]:
    facts, revision = store.range(_tenant_prefix(DESIRED_SERVICES, tenant))
    instances, _ = store.range(_tenant_prefix(INSTANCES, tenant), revision)
    observed, _ = store.range(_tenant_prefix(OBSERVED_INSTANCES, tenant), revision)
    running = {f.key.removeprefix(OBSERVED_INSTANCES): f.value for f in observed}
    scheduled: dict[str, int] = {}
    ready: dict[str, int] = {}
    for fact in instances:
        service, parts = derived_instance.service(fact.value) or "", fact.key.split("/")
        scheduled[service] = scheduled.get(service, 0) + 1
        if (running.get(f"{parts[2]}/{parts[4]}") or {}).get("ready"):
            ready[service] = ready.get(service, 0) + 1
    scales = {f.key.removeprefix(SCALE): f.value
              for f in store.range(_tenant_prefix(SCALE, tenant), revision)[0]}
    vips = {f.key.removeprefix(VIPS): f.value
            for f in store.range(_tenant_prefix(VIPS, tenant), revision)[0]}
    endpoints = {f.key.removeprefix(ENDPOINTS): f.value
                 for f in store.range(_tenant_prefix(ENDPOINTS, tenant), revision)[0]}
    names = {f.key.removeprefix(DNS): f.value
             for f in store.range(_tenant_prefix(DNS, tenant), revision)[0]}
    rollouts = {f.key.removeprefix(ROLLOUTS): f.value
                for f in store.range(_tenant_prefix(ROLLOUTS, tenant), revision)[0]}
    rows = []
    for fact in facts:
        if not _tags_match(fact.value, tags):
            continue
        full = fact.key.removeprefix(DESIRED_SERVICES)
        effective = effective_service(fact.value, scales.get(full))  # what the instance controller builds
        counted = full in scales and bool((fact.value.get("scale") or {}).get("horizontal"))
        rows.append(_row(fact.key, fact.value, created_revision=fact.create_revision,
                         modified=fact.mod_revision, desired=effective.get("instances"),
                         autoscaled=counted,
                         scheduled=scheduled.get(full, 0), ready=ready.get(full, 0),
                         vip=_vip(vips.get(full)), dns=_dns(names.get(full)),
                         endpoints=_endpoints(endpoints.get(full)),
                         rollout=_rollout(effective, rollouts.get(full))))
    return rows


def _rollout(service: Any, doc: Any) -> dict[str, Any] | None:
    """The service's rollout at a glance (`cca apply --wait` waits for it): state, reason, revision,
    and whether it is about the service's current (effective: with the autoscaler's requests) spec
    (else the controller has not seen it yet)."""
    if not isinstance(doc, dict) or not isinstance(service, dict):
        return None
    from ccattler.engine.controllers.instance import spec_hash

    return {"state": doc.get("state"), "reason": doc.get("reason"), "revision": doc.get("revision"),
            "current": doc.get("spec") == spec_hash(service)}


def instances(store: Store, tenant: str | None) -> list[dict[str, Any]]:
    facts, revision = store.range(_tenant_prefix(INSTANCES, tenant))
    placements = {f.key.removeprefix(PLACEMENTS): f.value
                  for f in store.range(_tenant_prefix(PLACEMENTS, tenant), revision)[0]}
    observed = {f.key.removeprefix(OBSERVED_INSTANCES): f.value
                for f in store.range(_tenant_prefix(OBSERVED_INSTANCES, tenant), revision)[0]}
    rows = []
    for fact in facts:
        t, inst = fact.key.split("/")[2], fact.key.split("/")[4]
        placement = placements.get(f"{t}/{inst}") or {}
        seen = observed.get(f"{t}/{inst}") or {}
        rows.append({"key": fact.key, "name": inst, "tenant": t, "value": fact.value,
                     "service": derived_instance.service(fact.value), "node": placement.get("node"),
                     "state": seen.get("state", "pending"), "ip": seen.get("ip"),
                     "restarts": seen.get("restarts", 0), "ready": seen.get("ready", False),
                     "health": seen.get("health"),
                     "reason": seen.get("reason"), "unplaced": placement.get("reasons") or None,
                     "volumes": seen.get("volumes") or [], "init": seen.get("init"),
                     "identity": seen.get("identity"),
                     "created_revision": fact.create_revision})
    return rows


def nodes(store: Store) -> list[dict[str, Any]]:
    observed, revision = store.range(OBSERVED_NODES)
    declared = {f.key.split("/")[2]: f.value for f in store.range(DESIRED_NODES, revision)[0]}
    condition = {f.key.split("/")[2]: f.value for f in store.range(NODE_CONDITIONS, revision)[0]}
    intents = {f.key.split("/")[2]: f.value for f in store.range(NODE_INTENT, revision)[0]}
    drains = {f.key.split("/")[2]: f.value for f in store.range(DRAINS, revision)[0]}
    placed: dict[str, int] = {}
    for fact in store.range(PLACEMENTS, revision)[0]:
        placed[fact.value.get("node")] = placed.get(fact.value.get("node"), 0) + 1
    names = sorted({f.key.split("/")[2] for f in observed} | set(declared))
    seen = {f.key.split("/")[2]: f for f in observed}
    rows = []
    for name in names:
        fact = seen.get(name)
        value = fact.value if fact else {}
        cond = (condition.get(name) or {}).get("condition") or ("ready" if fact else "unknown")
        mine = declared.get(name) or {}
        rows.append({"key": f"{OBSERVED_NODES}{name}", "name": name, "tenant": None, "value": value,
                     "declared": declared.get(name), "condition": cond, "instances": placed.get(name, 0),
                     # cca drain / disable-node, and what a drain waits for (disruption controller)
                     "intent": (intents.get(name) or {}).get("intent"),
                     "waits": list((drains.get(name) or {}).get("waits") or ()),
                     "moving": list((drains.get(name) or {}).get("moving") or ()),
                     "blocked": list((drains.get(name) or {}).get("blocked") or ()),  # as codes
                     # as placement sees them (engine/placement/model.py): declared over the agent's
                     "zone": mine.get("zone") or value.get("zone"),
                     "labels": {**(value.get("labels") or {}), **(mine.get("labels") or {})},
                     "restrictions": sorted(set(value.get("restrictions") or ())
                                            | set(mine.get("restrictions") or ())),
                     "created_revision": fact.create_revision if fact else None})
    return rows


def secrets(store: Store, tenant: str | None) -> list[dict[str, Any]]:
    declared, revision = store.range(_tenant_prefix(DESIRED_SECRETS, tenant))
    stored_facts, _ = store.range(_tenant_prefix(SECRETS, tenant), revision)
    values = {f.key.removeprefix(SECRETS): f for f in stored_facts}
    names = sorted({f.key.removeprefix(DESIRED_SECRETS) for f in declared} | set(values))
    docs = {f.key.removeprefix(DESIRED_SECRETS): f.value for f in declared}
    rows = []
    for full in names:
        stored = values.get(full)
        meta = {"version": stored.value.get("version"), "updated": stored.value.get("updated"),
                "key_id": stored.value.get("key_id")} if stored else None
        tenant_name, name = full.split("/", 1)
        rows.append({"key": f"{SECRETS}{full}", "name": name, "tenant": tenant_name,
                     "value": docs.get(full), "set": stored is not None, "meta": meta})
    return rows


def policies(store: Store) -> list[dict[str, Any]]:
    declared, revision = store.range(DESIRED_POLICIES)
    operator, _ = store.range(DESIRED_LP, revision)
    rows = [_row(f.key, f.value, type="policy") for f in declared]
    for fact in operator:
        text = fact.value.get("text", "") if isinstance(fact.value, dict) else ""
        rows.append(_row(fact.key, {"lines": text.count("\n") + 1}, type="lp"))
    return rows


def events(store: Store, limit: int = EVENT_HISTORY) -> list[dict[str, Any]]:
    """The latest changes to desired/, derived/ and observed/ state, oldest first."""
    revision = store.revision()
    start = max(0, revision - limit)
    rows: list[dict[str, Any]] = []
    reached = False
    with store.watch("", start) as watch:
        while True:
            # Past `revision`'s first event, the rest of its transaction is already queued.
            event = watch.get(timeout=0.05 if reached else 2.0)
            if event is None:
                break
            if event.kind == "resync":
                continue
            if event.revision > revision:
                break
            if event.key.startswith((DESIRED, DERIVED, OBSERVED)):
                rows.append({"revision": event.revision, "type": event.kind, "key": event.key,
                             "reason": _scaling_reason(event) or _rollout_reason(event)
                             or _netpolicy_reason(event)})
            reached = event.revision >= revision
    return rows


def _scaling_reason(event: Any) -> str | None:
    """An autoscaler write that changed the count says so, with its reasons."""
    if not event.key.startswith(SCALE) or not isinstance(event.value, dict):
        return None
    at, out = event.value.get("at"), []
    change = event.value.get("event")
    if isinstance(change, dict) and change.get("at") == at:
        out.append(f"scaled {change['from']} → {change['to']}: {'; '.join(change.get('reasons') or [])}")
    resized = event.value.get("vertical_event")  # a new spec revision: the rollout steps it
    if isinstance(resized, dict) and resized.get("at") == at:
        out.append(f"requests {resized['from']} → {resized['to']}: {'; '.join(resized.get('reasons') or [])}")
    return "; ".join(out) or None


def _netpolicy_reason(event: Any) -> str | None:
    """The netpolicy controller's condition: an extension failing its budget, or recovered."""
    if event.key != NETPOLICY_STATUS or not isinstance(event.value, dict):
        return None
    if event.value.get("state") == "failing":
        return f"{event.value.get('message')}; serving {event.value.get('serving')}"
    return f"netpolicy recovered from: {event.value.get('recovered_from')}"


def _rollout_reason(event: Any) -> str | None:
    """A rollout write that stepped, completed, waited or rolled back says so (engine/rollout)."""
    if not event.key.startswith(ROLLOUTS) or not isinstance(event.value, dict):
        return None
    change = event.value.get("event")
    if not isinstance(change, dict) or change.get("at") != event.value.get("at"):
        return None
    return str(change.get("text"))


def tenants(store: Store) -> list[dict[str, Any]]:
    """Every tenant that is declared or has services (and always the default one), with the quota
    admission enforces (`effective_quota`: the default instance quota when none is declared) and
    what the tenant commits against it."""
    declared, revision = store.range(DESIRED_TENANTS)
    docs = {f.key.removeprefix(DESIRED_TENANTS): f for f in declared}
    committed: dict[str, int] = {}
    for fact in store.range(DESIRED_SERVICES, revision)[0]:
        owner = fact.key.split("/")[2]
        committed[owner] = committed.get(owner, 0) + committed_instances(fact.value)
    rows = []
    for name in sorted({DEFAULT_TENANT, *docs, *committed}):
        fact = docs.get(name)
        quota = effective_quota(fact.value if fact else None)
        declared_quota = ((fact.value if fact else None) or {}).get("quota") or {}
        shown = ", ".join(f"{k} {v}{'' if declared_quota.get(k) is not None else ' (default)'}"
                          for k, v in sorted(quota.items()))
        rows.append({"key": f"{DESIRED_TENANTS}{name}", "name": name, "tenant": None,
                     "value": fact.value if fact else None, "declared": fact is not None,
                     "quota": shown, "instances": committed.get(name, 0),
                     "instance_quota": quota["instances"],
                     "created_revision": fact.create_revision if fact else None})
    return rows


def documents(store: Store, kind: str, tenant: str | None, tags: Mapping[str, str]) -> list[dict[str, Any]]:
    prefix = _tenant_prefix(f"{DESIRED}{kind}/", tenant if kind in NAMESPACED_KINDS else None)
    facts, _ = store.range(prefix)
    return [_row(f.key, f.value, created_revision=f.create_revision)
            for f in facts if _tags_match(f.value, tags)]


def status(store: Store) -> dict[str, Any]:
    """Counts and the runner leader: what `cca status` shows, all from one revision.

    Instances are counted against the services that are still desired, so a pruned or deleted
    service's instances leave `desired`, `placed` and `running` together, in the same answer as
    the service leaves `services`: until they are gone from their nodes they count as `stopping`
    (observed there, no longer desired — also an instance a rolling update replaced). So in every
    answer running ≤ placed ≤ desired, and nothing is counted as both running and removed."""
    revision = store.revision()

    def facts(prefix: str) -> list[Any]:
        return store.range(prefix, revision)[0]

    leader = store.get(LEADER_RUNNER)
    services = {f.key.removeprefix(DESIRED_SERVICES) for f in facts(DESIRED_SERVICES)}
    wanted = set()  # "tenant/instance" of every instance of a desired service
    for f in facts(INSTANCES):
        tenant, service, instance = (f.key.removeprefix(INSTANCES).split("/", 2) + ["", ""])[:3]
        if f"{tenant}/{service}" in services:
            wanted.add(f"{tenant}/{instance}")
    placed = sum(1 for f in facts(PLACEMENTS)
                 if f.value.get("node") and f.key.removeprefix(PLACEMENTS) in wanted)
    states = [(f.key.removeprefix(OBSERVED_INSTANCES) in wanted, f.value.get("state"))
              for f in facts(OBSERVED_INSTANCES)]
    conditions = [f.value.get("condition") for f in facts(NODE_CONDITIONS)]
    return {
        "revision": revision,
        "store": store.url.split("://")[0],
        "leader": leader.value if leader else None,
        "services": len(services),
        "instances": {"desired": len(wanted), "placed": placed,
                      "running": sum(1 for ours, state in states if ours and state == "running"),
                      "failed": sum(1 for ours, state in states if ours and state == "failed"),
                      "stopping": sum(1 for ours, _ in states if not ours)},
        "nodes": {"registered": len(facts(OBSERVED_NODES)), "down": conditions.count("down"),
                  "draining": conditions.count("draining")},
        "secrets": len(facts(SECRETS)),
        "policies": len(facts(DESIRED_POLICIES)) + len(facts(DESIRED_LP)),
    }


def _vip(doc: Any) -> str | None:
    """`10.96.0.3 (tcp/8080, tcp/443 external)` from a `derived/vip` document; None without one."""
    if not isinstance(doc, dict) or not doc.get("ip"):
        return None
    ports = ", ".join(f"{p.get('protocol')}/{p.get('port')}" + (" external" if p.get("external") else "")
                      for p in doc.get("ports") or [] if isinstance(p, dict))
    return f"{doc['ip']} ({ports})" if ports else str(doc["ip"])


def _dns(doc: Any) -> str | None:
    """`db.shop.cca.local (ordinals db-0.db.shop.cca.local … db-2.db.shop.cca.local)` from a
    `derived/dns` document, its error when the name cannot be served; None without one."""
    if not isinstance(doc, dict):
        return None
    if not doc.get("name"):
        return f"none: {doc.get('error') or 'no name'}"
    ordinals = [r["name"] for r in doc.get("records") or [] if isinstance(r, dict) and r.get("type") == "A"
                and isinstance(r.get("name"), str) and r["name"].endswith("." + doc["name"])]
    if not ordinals:
        return str(doc["name"])
    shown = ", ".join(ordinals) if len(ordinals) <= 3 else f"{ordinals[0]} … {ordinals[-1]}"
    return f"{doc['name']} (ordinals {shown})"


def _endpoints(doc: Any) -> list[str]:
    """The ready backends of a `derived/endpoint` document as `web-0 10.88.1.7 on n1`."""
    entries = doc.get("endpoints") if isinstance(doc, dict) else None
    return [f"{e.get('instance')} {e.get('ip') or '(no address)'} on {e.get('node')}"
            for e in entries or [] if isinstance(e, dict)]
