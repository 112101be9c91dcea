"""The autoscaler: `derived/scale/<tenant>/<service>` for every service with a `scale` block.

A pure function of the snapshot and its time: instances (derived), their agents' reports (state,
readiness, cgroup `usage`), metric samples (`observed/metric/<t>/<svc>/<name>/<source>`, each with
its `time`) and its own previous document, whose `history` (runs of recommendations) is what makes
stabilization survive a runner failover. Written only when the decision or the recommendation
changes, so a steady cluster writes nothing (the metric samples themselves are the agents' and the
API's writes). Decision code: engine/autoscale/horizontal.py; docs/autoscale.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, ClassVar

from ccattler.engine.autoscale import calc, horizontal, vertical
from ccattler.engine.facts import service_doc
from ccattler.engine.facts.keys import DESIRED_SERVICES, INSTANCES, METRICS, OBSERVED_INSTANCES, SCALE
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot

#: Samples older than this many sample periods count as missing.
STALE_PERIODS = 3
_STATE = {"running": calc.RUNNING, "pending": calc.PENDING, "starting": calc.PENDING,
          "failed": calc.FAILED, "stopped": calc.STOPPING}


class AutoscaleController:
    name: ClassVar[str] = "autoscaler"
    reads: ClassVar[tuple[str, ...]] = (DESIRED_SERVICES, INSTANCES, OBSERVED_INSTANCES, METRICS, SCALE)
    writes: ClassVar[tuple[str, ...]] = (SCALE,)

    def __init__(self, time_zone: str = "UTC", sample_period: float = 15.0) -> None:
        self.time_zone = time_zone
        self.sample_period = sample_period

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        services: dict[str, Mapping[str, Any]] = {}
        members: dict[str, list[str]] = defaultdict(list)
        metrics: dict[str, dict[str, dict[str, Any]]] = defaultdict(lambda: defaultdict(dict))
        scales: dict[str, Mapping[str, Any]] = {}
        for key, doc in snapshot.values.items():
            if key.startswith(DESIRED_SERVICES):
                if isinstance(doc, Mapping) and service_doc.horizontal(doc):
                    services[key[len(DESIRED_SERVICES):]] = doc
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
        for full, service in services.items():
            tenant = full.split("/", 1)[0]
            doc = self.decide(full, service, sorted(members.get(full, [])), tenant, snapshot,
                              metrics.get(full, {}), scales.get(full), now)
            old = scales.get(full)
            if doc != old:
                puts[SCALE + full] = doc
        gone = frozenset(SCALE + f for f in scales if f not in services)
        return ChangeSet(puts=puts, deletes=gone)

    def decide(self, full, service, names, tenant, snapshot, metrics, previous, now) -> dict:
        now_ms = int(now * 1000)
        stale_before = now - STALE_PERIODS * self.sample_period
        fresh = {name: {src: s for src, s in by_src.items()
                        if isinstance(s.get("value"), (int, float)) and (s.get("time") or 0) >= stale_before}
                 for name, by_src in metrics.items()}
        insts = [self._instance(name, snapshot.get(f"{OBSERVED_INSTANCES}{tenant}/{name}"), service, fresh)
                 for name in names]
        insts = _share_totals(insts, fresh, set(names))
        events = {}
        for e in service["scale"]["horizontal"].get("events") or []:
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
        h = service["scale"]["horizontal"]
        d = horizontal.decide(h, current, insts, events, now_ms, history, self.time_zone)
        doc = {"service": full, "desired": d.desired, "recommended": d.recommended, "term": d.term,
               "terms": d.terms, "reasons": d.reasons, "hold": d.hold, "clamp": d.clamp,
               "floor": d.floor, "history": d.history, "min": h.get("min"), "max": h.get("max")}
        if previous and _same_decision(previous, doc):
            return previous  # only the last run's last_at moved: no write (see _same_decision)
        doc["at"] = now_ms
        if d.desired != current:
            doc["event"] = {"at": now_ms, "from": current, "to": d.desired, "reasons": d.reasons}
        elif previous and previous.get("event"):
            doc["event"] = previous["event"]
        v = service_doc.vertical(service)
        if v:
            usage = [[now_ms, i.samples.get("cpu"), i.samples.get("memory")] for i in insts
                     if i.state == calc.RUNNING]
            _, _, _, detail = vertical.recommend(v, dict(service_doc.resources(service)), usage, now_ms, {})
            doc["vertical"] = detail
        return doc

    def _instance(self, name, observed, service, fresh) -> calc.Instance:
        resources = service_doc.resources(service)
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
        return calc.Instance(name, state=_STATE.get(observed.get("state"), calc.PENDING),
                             ready=bool(observed.get("ready")), requests=requests, samples=samples)


def _same_decision(previous: Mapping[str, Any], doc: Mapping[str, Any]) -> bool:
    """Equal but for the time the current run was last seen: the store keeps the older last_at
    (a failover then extends the run from there, never losing a recommendation's start)."""
    ph, dh = previous.get("history") or [], doc["history"]
    if len(ph) != len(dh) or [r[0::2] for r in ph] != [r[0::2] for r in dh]:
        return False
    keys = ("desired", "recommended", "term", "reasons", "hold", "clamp", "floor")
    if not all(previous.get(k) == doc[k] for k in keys):
        return False
    # observed values move with every sample: they are written with the next decision change
    # (explain shows them with the document's `at`), so steady load writes nothing
    strip = [{k: v for k, v in t.items() if k != "observed"} for t in doc["terms"]]
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
                          {**{m: v for m, v in shares.items() if i.state == calc.RUNNING}, **i.samples})
            for i in insts]
