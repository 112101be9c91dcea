"""The autoscaler: `derived/scale/<tenant>/<service>` for every service with a `scale` block.

A pure function of the snapshot and its time: instances (derived), their agents' reports (state,
readiness, cgroup `usage`), metric samples (`observed/metric/<t>/<svc>/<name>/<source>`, each with
its `time`) and its own previous document, whose `history` (runs of recommendations) is what makes
stabilization survive a runner failover. Written only when the decision or the recommendation
changes, so a steady cluster writes nothing (the metric samples themselves are the agents' and the
API's writes). Decision code: engine/autoscale/horizontal.py and vertical.py; docs/autoscale.md.
A vertical block's applied `requests` become the effective service's resources (effective.py),
so the rollout controller rolls them out as a new spec revision.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, ClassVar

from ccattler.engine.admission.vocabulary import committed_instances, effective_quota
from ccattler.engine.autoscale import calc, horizontal, vertical
from ccattler.engine.autoscale.effective import effective_service, vertical_requests
from ccattler.engine.facts import observed_instance, service_doc
from ccattler.engine.facts.keys import (
    DESIRED_SERVICES,
    DESIRED_TENANTS,
    INSTANCES,
    METRICS,
    OBSERVED_INSTANCES,
    SCALE,
)
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot

#: Samples older than this many sample periods count as missing.
STALE_PERIODS = 3
_STATE = {"running": calc.RUNNING, "pending": calc.PENDING, "starting": calc.PENDING,
          "failed": calc.FAILED, "stopped": calc.STOPPING}


class AutoscaleController:
    name: ClassVar[str] = "autoscaler"
    reads: ClassVar[tuple[str, ...]] = (DESIRED_SERVICES, DESIRED_TENANTS, INSTANCES, OBSERVED_INSTANCES,
                                        METRICS, SCALE)
    writes: ClassVar[tuple[str, ...]] = (SCALE,)

    def __init__(self, time_zone: str = "UTC", sample_period: float = 15.0) -> None:
        self.time_zone = time_zone
        self.sample_period = sample_period
        self._due: float | None = None
        # Observed-instance key prefixes of the autoscaled services' instances (`<svc>-…`), as of
        # the last reconcile; None: not known yet, every report wakes it.
        self._reports: tuple[str, ...] | None = None

    def wakes_on(self, key: str, *change: Any) -> bool:
        """Agents' reports wake it only for instances of autoscaled services: on a large cluster
        most reports are of services with no `scale` block. Every other read always wakes it.
        Called from watch threads: it reads one attribute, and a service change resets it by one
        assignment (atomic under the GIL), so no lock is needed."""
        if key.startswith(DESIRED_SERVICES):  # a service may have gained a `scale` block: every
            self._reports = None              # report wakes it until it has run again
            return True
        reports = self._reports
        if reports is None or not key.startswith(OBSERVED_INSTANCES) or key == OBSERVED_INSTANCES:
            return True  # not known yet, not a report, or a re-list of all reports
        return key.startswith(reports)

    def next_due(self) -> float | None:
        """When a decision changes with time alone (the runner runs it then): the earliest end of a
        stabilization hold or of a vertical change's wait, as of the last reconcile."""
        return self._due

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        services: dict[str, Mapping[str, Any]] = {}
        members: dict[str, list[str]] = defaultdict(list)
        metrics: dict[str, dict[str, dict[str, Any]]] = defaultdict(lambda: defaultdict(dict))
        scales: dict[str, Mapping[str, Any]] = {}
        every: dict[str, Mapping[str, Any]] = {}  # every service, for its tenant's quota room
        tenants: dict[str, Mapping[str, Any]] = {}
        for key, doc in snapshot.values.items():
            if key.startswith(DESIRED_SERVICES):
                if isinstance(doc, Mapping):
                    every[key[len(DESIRED_SERVICES):]] = doc
                    if service_doc.horizontal(doc) or service_doc.vertical(doc):
                        services[key[len(DESIRED_SERVICES):]] = doc
            elif key.startswith(DESIRED_TENANTS):
                if isinstance(doc, Mapping):
                    tenants[key[len(DESIRED_TENANTS):]] = doc
            elif key.startswith(INSTANCES):
                full, _, inst = key[len(INSTANCES):].rpartition("/")
                members[full].append(inst)
            elif key.startswith(METRICS):
                parts = key[len(METRICS):].split("/")
                if len(parts) == 4 and isinstance(doc, Mapping):
                    metrics[f"{parts[0]}/{parts[1]}"][parts[2]][parts[3]] = doc
            elif key.startswith(SCALE):
                scales[key[len(SCALE):]] = doc
        puts: dict[str, Any] = {}
        quotas = TenantRoom(every, tenants, scales)
        for full, service in sorted(services.items()):
            tenant = full.split("/", 1)[0]
            doc = self.decide(full, service, sorted(members.get(full, [])), tenant, snapshot,
                              metrics.get(full, {}), scales.get(full), now, quotas)
            old = scales.get(full)
            if doc != old:
                puts[SCALE + full] = doc
        due = [d for full, service in services.items()
               if (d := _due(puts.get(SCALE + full) or scales.get(full), service_doc.vertical(service)))
               and d > now]
        self._reports = tuple(sorted(f"{OBSERVED_INSTANCES}{full}-" for full in services))
        self._due = min(due) if due else None
        gone = frozenset(SCALE + f for f in scales if f not in services)
        return ChangeSet(puts=puts, deletes=gone)

    def decide(self, full, service, names, tenant, snapshot, metrics, previous, now,
               quotas: TenantRoom | None = None) -> dict:
        now_ms = int(now * 1000)
        stale_before = now - STALE_PERIODS * self.sample_period
        fresh = {name: {src: s for src, s in by_src.items()
                        if isinstance(s.get("value"), (int, float)) and (s.get("time") or 0) >= stale_before}
                 for name, by_src in metrics.items()}
        previous = previous if isinstance(previous, Mapping) else None
        requests = vertical_requests(service, previous) or dict(service_doc.resources(service))
        observed = {name: snapshot.get(f"{OBSERVED_INSTANCES}{tenant}/{name}") for name in names}
        insts = [self._instance(name, observed[name], requests, fresh, now) for name in names]
        insts = _share_totals(insts, fresh, set(names))
        doc: dict[str, Any] = {"service": full}
        h = service_doc.horizontal(service)
        if h:
            doc.update(self._horizontal(h, service, insts, fresh, previous, now_ms))
            if quotas is not None:
                quotas.clamp(full, service, requests, doc)
        v = service_doc.vertical(service)
        if v:
            doc.update(_vertical(v, service, requests, _window_usage(insts, observed, now_ms), previous,
                                 now_ms))
        if previous and _same_decision(previous, doc):
            return previous  # only the last run's last_at moved: no write (see _same_decision)
        doc["at"] = now_ms
        if h:
            current = doc.pop("_current")
            if doc["desired"] != current:
                doc["event"] = {"at": now_ms, "from": current, "to": doc["desired"],
                                "reasons": doc["reasons"]}
            elif previous and previous.get("event"):
                doc["event"] = previous["event"]
        return doc

    def _horizontal(self, h, service, insts, fresh, previous, now_ms) -> dict:
        events = {}
        for e in h.get("events") or []:
            samples = fresh.get(e["source"]) or {}
            if samples:
                events[e["source"]] = max(samples.values(), key=lambda s: s["time"])["value"]
        if previous and isinstance(previous.get("desired"), int):
            current, history = previous["desired"], [list(r) for r in previous.get("history") or []]
            if history:  # the stored run is still the standing recommendation: it lasts until now
                history[-1][1] = max(history[-1][1], now_ms)
        else:  # a first decision: the history starts at the user's count
            current = service.get("instances", 1)
            history = [[now_ms, now_ms, current]]
        d = horizontal.decide(h, current, insts, events, now_ms, history, self.time_zone)
        for t in d.terms:  # where each term's samples came from (`gate`, `dataplane`, `cli`, …)
            by_src = fresh.get(t["metric"])
            if by_src:
                t["sources"] = sorted({str(s.get("source") or src) for src, s in by_src.items()})
        return {"desired": d.desired, "recommended": d.recommended, "term": d.term,
                "terms": d.terms, "reasons": d.reasons, "hold": d.hold, "clamp": d.clamp,
                "floor": d.floor, "history": d.history, "min": h.get("min"), "max": h.get("max"),
                "_current": current}

    def _instance(self, name, observed, resources, fresh, now) -> calc.Instance:
        requests = {"cpu": resources.get("cpu"), "memory": resources.get("memory")}
        if not isinstance(observed, Mapping):
            return calc.Instance(name, state=calc.PENDING, ready=False, requests=requests)
        samples = {}
        usage = observed.get("usage")
        if isinstance(usage, Mapping):
            samples = {k: usage[k] for k in ("cpu", "memory") if isinstance(usage.get(k), (int, float))}
        for metric, by_src in fresh.items():
            if name in by_src:
                samples[metric] = by_src[name]["value"]
        ready = bool(observed.get("ready"))
        return calc.Instance(name, state=_STATE.get(observed.get("state"), calc.PENDING), ready=ready,
                             requests=requests, samples=samples,
                             cpu_unready=_cpu_unready(observed, ready, now))


class TenantRoom:
    """The tenant quota (engine/admission/vocabulary.effective_quota: instances, and cpu/memory
    when declared) as a ceiling on autoscaled counts. Admission counts a service's committed
    instances (its `instances`, or `min` when higher); above that, the count the autoscaler
    sets is bounded here: a service may grow only into what the tenant's other services leave.
    Services are decided in key order and each sees the counts decided before it."""

    def __init__(self, services: Mapping[str, Mapping[str, Any]], tenants: Mapping[str, Mapping[str, Any]],
                 scales: Mapping[str, Any]) -> None:
        self._quota = {name: effective_quota(doc) for name, doc in tenants.items()}
        self._counts: dict[str, tuple[int, int, int]] = {}  # service → (instances, cpu, memory)
        self._totals: dict[str, tuple[int, int, int]] = {}  # tenant → the sums of its services'
        for full, doc in services.items():
            count = effective_service(doc, scales.get(full)).get("instances")
            self._set(full, count if isinstance(count, int) else committed_instances(doc),
                      vertical_requests(doc, scales.get(full)) or service_doc.resources(doc))

    def _set(self, full: str, count: int, requests: Mapping[str, Any]) -> None:
        """Record `full`'s count and keep its tenant's sums (no pass over the tenant per service)."""
        new = (count, count * int(requests.get("cpu") or 0), count * int(requests.get("memory") or 0))
        old = self._counts.get(full, (0, 0, 0))
        tenant = full.split("/", 1)[0]
        total = self._totals.get(tenant, (0, 0, 0))
        self._totals[tenant] = tuple(t - o + n for t, o, n in zip(total, old, new, strict=True))
        self._counts[full] = new

    def clamp(self, full: str, service: Mapping[str, Any], requests: Mapping[str, Any], doc: dict) -> None:
        """Lower `doc["desired"]` to the tenant's room (never below the committed count, which
        admission already holds within the quota) and say so in its clamp and reasons."""
        tenant = full.split("/", 1)[0]
        quota = self._quota.get(tenant) or effective_quota(None)
        own, total = self._counts.get(full, (0, 0, 0)), self._totals.get(tenant, (0, 0, 0))
        room = []
        for index, (resource, per) in enumerate((("instances", 1), ("cpu", requests.get("cpu")),
                                                 ("memory", requests.get("memory")))):
            limit, per = quota.get(resource), int(per or 0)
            if isinstance(limit, int) and per > 0:
                left = limit - (total[index] - own[index])  # what the tenant's other services leave
                room.append((max(0, left) // per, resource, limit))
        desired = doc["desired"]
        if room:
            most, resource, limit = min(room)
            most = max(most, committed_instances(service))
            if desired > most:
                doc["clamp"] = f"lowered to {most} by tenant {tenant}'s {resource} quota ({limit})"
                doc["reasons"] = [*doc["reasons"], f"{desired} {doc['clamp']}"]
                doc["desired"] = desired = most
        self._set(full, desired, requests)


def _cpu_unready(observed: Mapping[str, Any], ready: bool, now: float) -> bool | None:
    """The HPA's cpu set-aside from the agent's `started`, `ready_since` and the cpu sample's `at`
    and `window` (agent/reconcile.py, agent/telemetry.py); None when the report lacks the times."""
    started, since = observed.get("started"), observed.get("ready_since")
    if not _number(started) or not _number(since):
        return None
    usage = observed_instance.usage(observed)
    at, window = usage.get("at"), usage.get("window")
    return calc.cpu_set_aside(ready, started, since, at if _number(at) else None,
                              window if _number(window) else None, now)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _window_usage(insts, observed, now_ms) -> list[list]:
    """`[now, cpu, memory]` per running instance for the vertical P95: each instance's P95 over the
    window as its agent publishes it (`cpu_p95`, `memory_p95`, agent/telemetry.py), else its
    current sample."""
    rows = []
    for i in insts:
        if i.state != calc.RUNNING:
            continue
        usage = observed_instance.usage(observed.get(i.name))
        rows.append([now_ms] + [usage.get(f"{k}_p95", i.samples.get(k)) for k in ("cpu", "memory")])
    return rows


def _vertical(v, service, requests, usage, previous, now_ms) -> dict:
    """The vertical part: the requests applied (`requests`, computed from the user's `base`
    resources), the change waiting out its stabilization (`pending`), the P95s (`vertical`) and the
    last applied change (`vertical_event`). A changed `requests` changes the effective service's
    spec, so the rollout controller rolls it out within the update and disruption budgets."""
    base = dict(service_doc.resources(service))
    ours = previous if previous and previous.get("base") == base else {}  # a new apply starts over
    new, pending, reasons, detail = vertical.recommend(v, requests, usage, now_ms, ours.get("pending"))
    out = {"vertical": detail, "base": base, "pending": pending or None,
           "vertical_reasons": reasons, "vertical_event": ours.get("vertical_event")}
    if new != requests:
        out["vertical_event"] = {"at": now_ms, "from": {k: requests.get(k) for k in ("cpu", "memory")},
                                 "to": {k: new.get(k) for k in ("cpu", "memory")},
                                 "reasons": [r for r in reasons if "->" in r]}
    applied = {k: new[k] for k in ("cpu", "memory")
               if new.get(k) != base.get(k) and isinstance(new.get(k), int)}
    out["requests"] = applied or None
    return out


def _due(doc: Any, bounds: Mapping[str, Any]) -> float | None:
    """Unix seconds at which this document's decision may change without a new sample (a little
    after the boundary: the window's test is strict); `bounds` the service's vertical block."""
    if not isinstance(doc, Mapping):
        return None
    times = []
    hold = doc.get("hold")
    if isinstance(hold, Mapping) and isinstance(hold.get("until"), (int, float)):
        times.append(hold["until"])
    for p in (doc.get("pending") or {}).values():
        if isinstance(p, Mapping) and isinstance(p.get("since"), (int, float)):
            times.append(p["since"] + service_doc.vertical_wait_ms(bounds, p.get("direction")))
    return (min(times) + 10) / 1000 if times else None


def _same_decision(previous: Mapping[str, Any], doc: Mapping[str, Any]) -> bool:
    """Equal but for the time the current run was last seen: the store keeps the older last_at
    (a failover then extends the run from there, never losing a recommendation's start)."""
    ph, dh = previous.get("history") or [], doc.get("history") or []
    if len(ph) != len(dh) or [r[0::2] for r in ph] != [r[0::2] for r in dh]:
        return False
    keys = ("desired", "recommended", "term", "reasons", "hold", "clamp", "floor",
            "requests", "base", "pending", "vertical_event")
    if not all(previous.get(k) == doc.get(k) for k in keys):
        return False
    # observed values (and the vertical P95s) move with every sample: they are written with the
    # next decision change (explain shows them with the document's `at`), so steady load writes nothing
    strip = [{k: v for k, v in t.items() if k != "observed"} for t in doc.get("terms") or []]
    return strip == [{k: v for k, v in t.items() if k != "observed"} for t in previous.get("terms") or []]


def _share_totals(insts, fresh, names: set) -> list:
    """A sample whose source is not an instance (`cli`, a gate, the data plane) is the service's
    total: each running instance without its own sample gets an equal share."""
    shares: dict[str, float] = {}
    for metric, by_src in fresh.items():
        total = sum(s["value"] for src, s in by_src.items() if src not in names)
        if any(src not in names for src in by_src):
            takers = [i for i in insts if i.state == calc.RUNNING and metric not in i.samples]
            if takers:
                shares[metric] = total / len(takers)
    if not shares:
        return insts
    return [calc.Instance(i.name, i.state, i.ready, i.cpu_initializing, i.requests,
                          {**{m: v for m, v in shares.items() if i.state == calc.RUNNING}, **i.samples},
                          i.cpu_unready)
            for i in insts]
