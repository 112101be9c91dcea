"""The rollout controller: a spec change becomes a rolling update, stepped in
`derived/rollout/<tenant>/<service>` (the instance controller applies it: docs/controllers.md).

Reads the services, the autoscaler's counts, instances, placements, agents' instance reports and
its own documents. Pure: time is the `now` the runner passes. Per service the document carries the
spec being rolled out (`spec`), the spec instances are built from (`build`: the same, or the
previous one after a rollback), `counts`/`drop` for the instance controller, the state and why,
the spec fields of every spec still running (`fields`: agents build an old instance from them)
and a short history. After `MAX_FAILURES` failures of new-spec instances, or no progress within
the `update { deadline }`, it rolls back in one change and never retries that spec: only a new
spec (a new apply, or `cca rollout undo`) starts another rollout.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, ClassVar

from ccattler.engine.autoscale.effective import effective_service
from ccattler.engine.controllers.instance import SPEC_FIELDS, replica_count, spec_hash
from ccattler.engine.disruption.controller import is_ready
from ccattler.engine.facts import derived_instance
from ccattler.engine.facts.keys import (
    DESIRED_SERVICES,
    INSTANCES,
    OBSERVED_INSTANCES,
    PLACEMENTS,
    ROLLOUTS,
    SCALE,
    display_name,
)
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot
from ccattler.engine.rollout.step import MAX_FAILURES, Member, Policy, policy_of, step

#: States in which nothing is stepped any more (until the service's spec changes).
SETTLED = frozenset({"complete", "rolled back", "failed"})
STATES = SETTLED | {"progressing", "waiting"}
HISTORY = 10


def spec_fields(service: Mapping[str, Any]) -> dict[str, Any]:
    return {name: service.get(name) for name in SPEC_FIELDS}


class RolloutController:
    """Steps each service's rolling update and rolls a failing one back."""

    name: ClassVar[str] = "rollout"
    reads: ClassVar[tuple[str, ...]] = (
        DESIRED_SERVICES, SCALE, INSTANCES, PLACEMENTS, OBSERVED_INSTANCES, ROLLOUTS,
    )
    writes: ClassVar[tuple[str, ...]] = (ROLLOUTS,)

    def __init__(self) -> None:
        self._busy = True  # a rollout is under way: agents' reports (readiness, restarts) matter
        # service → (its inputs, its document) when settled: a settled document depends on the
        # service, its count and its instances' specs only (not on time or reports), so the same
        # inputs give the same document — a memo that never alters a result.
        self._settled: dict[str, tuple[tuple[Any, ...], Mapping[str, Any]]] = {}

    def wakes_on(self, key: str, *change: Any) -> bool:
        """Agents' reports matter only while a rollout steps (the periodic resync covers deadlines)."""
        return self._busy or not key.startswith(OBSERVED_INSTANCES)

    def depends_on(self, key: str) -> tuple[str, ...]:
        return (DESIRED_SERVICES + key[len(ROLLOUTS):],)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        services: dict[str, Mapping[str, Any]] = {}
        instances: dict[str, list[tuple[str, Mapping[str, Any]]]] = defaultdict(list)
        placements: dict[str, Any] = {}
        observed: dict[str, Mapping[str, Any]] = {}
        rollouts: dict[str, Mapping[str, Any]] = {}
        for key, doc in snapshot.values.items():
            if not isinstance(doc, Mapping):
                continue
            if key.startswith(OBSERVED_INSTANCES):
                observed[key[len(OBSERVED_INSTANCES):]] = doc
            elif key.startswith(PLACEMENTS):
                placements[key[len(PLACEMENTS):]] = doc.get("node")
            elif key.startswith(INSTANCES):
                full, _, name = key[len(INSTANCES):].rpartition("/")
                instances[full].append((name, doc))
            elif key.startswith(DESIRED_SERVICES):
                services[key[len(DESIRED_SERVICES):]] = doc
            elif key.startswith(ROLLOUTS):
                rollouts[key[len(ROLLOUTS):]] = doc
        puts: dict[str, Any] = {}
        busy = False
        settled: dict[str, tuple[tuple[Any, ...], Mapping[str, Any]]] = {}
        for full, service in sorted(services.items()):
            old = rollouts.get(full)
            specs = tuple(sorted((name, derived_instance.spec(doc)) for name, doc in instances.get(full, ())))
            inputs = (service, snapshot.get(SCALE + full), old, specs)
            memo = self._settled.get(full)
            if memo is not None and memo[0] == inputs:
                puts[ROLLOUTS + full] = settled.setdefault(full, memo)[1]
                continue
            tenant = full.split("/", 1)[0]
            reports = {name: observed.get(f"{tenant}/{name}") for name, _ in instances.get(full, ())}
            members = [Member(name, derived_instance.spec(doc),
                              is_ready(reports[name], placements.get(f"{tenant}/{name}")),
                              derived_instance.ordinal(doc))
                       for name, doc in sorted(instances.get(full, ()), key=lambda item: item[0])]
            doc = rollout(full, service, snapshot.get(SCALE + full),
                          members, reports, old if isinstance(old, Mapping) else None, now)
            if doc is not None:
                puts[ROLLOUTS + full] = doc
                busy |= doc["state"] not in SETTLED
                if doc["state"] in SETTLED and doc == old:
                    settled[full] = (inputs, doc)
        deletes = frozenset(k for k, _ in snapshot.under(ROLLOUTS) if k[len(ROLLOUTS):] not in services)
        self._busy = busy
        self._settled = settled
        return ChangeSet(puts, deletes)


def rollout(full: str, service: Mapping[str, Any], scale: Mapping[str, Any] | None,
            members: list[Member], reports: Mapping[str, Mapping[str, Any] | None],
            doc: Mapping[str, Any] | None, now: float) -> dict[str, Any] | None:
    """The next rollout document of the service `full` ("tenant/name"; the same document when
    nothing changed), or None to leave it alone (a malformed count)."""
    name = display_name(*full.split("/", 1))
    effective = effective_service(service, scale)  # the autoscaler's count and vertical requests
    n = replica_count(effective)
    if n is None:
        return dict(doc) if doc else None
    spec = spec_hash(effective)
    policy = policy_of(effective, n)
    if doc is None or doc.get("spec") != spec or not _well_formed(doc):
        new = _begin(full, effective, spec, members, doc, now, _cause(service, scale, doc))
    else:
        new = _copy(doc)
    new["source"] = spec_hash(service)  # the user's own spec (`_cause`)
    if new["state"] in ("rolled back", "failed"):
        if new["state"] == "rolled back":
            new["counts"] = {new["build"]: n, spec: 0}
    elif new["state"] == "complete":
        new["counts"], new["drop"] = {}, []
    else:
        _advance(name, new, policy, spec, members, reports, now)
    new["fields"] = {s: f for s, f in new["fields"].items()
                     if s in {spec, new["build"], new.get("previous")} | {m.spec for m in members}}
    if doc is not None and _without(new, "at") == _without(doc, "at"):
        return dict(doc)
    new["at"] = now
    return new


def _well_formed(doc: Mapping[str, Any]) -> bool:
    """A document this controller wrote (one of another shape starts a new revision)."""
    return (doc.get("state") in STATES and isinstance(doc.get("history"), list) and bool(doc["history"])
            and isinstance(doc.get("fields"), Mapping) and isinstance(doc.get("build"), str)
            and isinstance(doc.get("baseline", {}), Mapping))


def _without(doc: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in keys}


def _copy(doc: Mapping[str, Any]) -> dict[str, Any]:
    new = {k: (dict(v) if isinstance(v, Mapping) else list(v) if isinstance(v, list) else v)
           for k, v in doc.items()}
    new["history"] = [dict(h) for h in doc.get("history") or []]
    return new


def _cause(service: Mapping[str, Any], scale: Mapping[str, Any] | None,
           doc: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """Who made the new revision: `("autoscaler", why)` when the user's own spec (`source`, its
    hash) is the previous revision's and the autoscaler's vertical requests are what changed;
    else `("apply", None)`."""
    user = spec_hash(service)
    if doc is not None and doc.get("source") == user and (scale or {}).get("vertical_event"):
        event = scale["vertical_event"]
        return "autoscaler", "; ".join(event.get("reasons") or []) or "vertical requests"
    return "apply", None


def _begin(full: str, service: Mapping[str, Any], spec: str, members: list[Member],
           doc: Mapping[str, Any] | None, now: float,
           cause: tuple[str, str | None] = ("apply", None)) -> dict[str, Any]:
    """A new revision: the first document of a service, or a spec change."""
    name = display_name(*full.split("/", 1))
    running = {m.spec for m in members if m.spec is not None}
    known = (doc or {}).get("fields")
    fields = ({str(s): f for s, f in known.items() if isinstance(f, Mapping)}
              if isinstance(known, Mapping) else {})
    fields[spec] = spec_fields(service)
    if doc is None:
        previous = None
    elif doc.get("state") == "complete":
        previous = doc.get("spec")
    else:  # mid-rollout, rolled back or failed: the last spec that completed
        previous = doc.get("previous") if doc.get("state") != "rolled back" else doc.get("build")
    if previous == spec:  # back to the spec that ran before (an undo): nothing earlier is known
        previous = None
    past = (doc or {}).get("history")
    history = [dict(h) for h in past if isinstance(h, Mapping)] if isinstance(past, list) else []
    if history and history[-1].get("state") in ("progressing", "waiting"):
        history[-1].update(state="superseded", finished=now)
    before = (doc or {}).get("revision")
    revision = (before if isinstance(before, int) and not isinstance(before, bool) else 0) + 1
    fresh = not running or running <= {spec}
    state = "complete" if fresh else "progressing"
    history.append({"revision": revision, "spec": spec, "image": service.get("image"), "state": state,
                    "reason": None, "started": now, "finished": now if fresh else None,
                    "cause": cause[0], "why": cause[1]})
    new = {"service": full, "spec": spec, "build": spec, "counts": {}, "drop": [], "state": state,
           "reason": None, "waiting": None, "previous": previous, "fields": fields, "revision": revision,
           "started": now, "progress": None, "progress_at": now, "failures": 0, "baseline": {},
           "history": history[-HISTORY:], "event": None}
    if not fresh:
        what = f"autoscaler: {cause[1]}" if cause[0] == "autoscaler" else f"image {service.get('image')}"
        new["event"] = {"at": now, "text": f"{name}: rollout {revision} started ({what})"}
    return new


def _failures(new: Mapping[str, Any], spec: str, members: list[Member],
              reports: Mapping[str, Mapping[str, Any] | None]) -> tuple[int, str | None]:
    """Failures of new-spec instances since they got the spec (their agents' restart counts, less a
    stateful ordinal's count at its switch), and the latest reason an agent gave."""
    baseline = new.get("baseline") or {}
    total, why = 0, None
    for m in members:
        report = reports.get(m.name)
        if m.spec != spec or not isinstance(report, Mapping):
            continue
        restarts = report.get("restarts")
        if isinstance(restarts, int):
            total += max(0, restarts - int(baseline.get(m.name, 0)))
        if report.get("reason"):
            why = f"{m.name}: {report['reason']}"
    return max(total, int(new.get("failures") or 0)), why


def _advance(name: str, new: dict[str, Any], policy: Policy, spec: str, members: list[Member],
             reports: Mapping[str, Mapping[str, Any] | None], now: float) -> None:
    failures, why = _failures(new, spec, members, reports)
    new["failures"] = failures
    if failures >= MAX_FAILURES:
        _roll_back(name, new, policy, f"{failures} failures of new instances" + (f" ({why})" if why else ""),
                   now)
        return
    progress = [sum(m.ready for m in members if m.spec == spec), sum(m.spec != spec for m in members)]
    if new.get("progress") != progress:
        new["progress"], new["progress_at"] = progress, now
    elif now - float(new.get("progress_at") or now) >= policy.deadline_ms / 1000:
        _roll_back(name, new, policy, f"no progress for {policy.deadline_ms / 1000:g}s "
                                      f"({progress[0]} of {policy.instances} new instances ready)", now)
        return
    s = step(policy, spec, members)
    before = (new.get("counts"), new.get("drop"), new.get("state"))
    if s.done:
        new.update(counts={}, drop=[], state="complete", reason=None, waiting=None)
        new["history"][-1].update(state="complete", finished=now)
        _event(new, now, f"{name}: rollout {new['revision']} complete")
        return
    new.update(counts=s.counts, drop=list(s.drop), reason=s.reason, waiting=s.waiting,
               state="waiting" if s.waiting == "no-budget" else "progressing")
    new["history"][-1]["state"] = new["state"]
    for ordinal in s.switched:
        report = reports.get(ordinal) or {}
        new["baseline"][ordinal] = report.get("restarts") if isinstance(report.get("restarts"), int) else 0
    if before[:2] != (new["counts"], new["drop"]):
        old = sum(c for h, c in s.counts.items() if h != spec)
        text = f"{name}: rollout {new['revision']} step: {s.counts.get(spec, 0)} new, {old} old"
        if s.drop:
            text += f" (removing {', '.join(s.drop)})"
        if s.switched:
            text += f" (updating {', '.join(s.switched)})"
        _event(new, now, text)
    elif new["state"] == "waiting" and before[2] != "waiting":
        _event(new, now, f"{name}: rollout {new['revision']} waits: {s.reason}")


def _roll_back(name: str, new: dict[str, Any], policy: Policy, reason: str, now: float) -> None:
    previous = new.get("previous")
    if previous is None or previous not in new["fields"]:
        reason += "; cannot roll back: the previous spec is not known"
        new.update(state="failed", reason=reason, waiting=None)
        new["history"][-1].update(state="failed", reason=reason, finished=now)
        _event(new, now, f"{name}: rollout {new['revision']} failed: {reason}")
        return
    new.update(build=previous, counts={previous: policy.instances, new["spec"]: 0}, drop=[],
               state="rolled back", reason=reason, waiting=None)
    new["history"][-1].update(state="rolled back", reason=reason, finished=now)
    _event(new, now, f"{name}: rollout {new['revision']} rolled back: {reason}")


def _event(new: dict[str, Any], now: float, text: str) -> None:
    """The document's event; a second one in the same reconcile (a start and its first step) adds."""
    event = new.get("event")
    if isinstance(event, Mapping) and event.get("at") == now and event.get("text"):
        text = f"{event['text']}; {text.split(': ', 1)[1]}"
    new["event"] = {"at": now, "text": text}
