"""The instance controller: desired replica counts become `derived/instance/...` documents with stable ids.

Stateless services get instances `<service>-<suffix>`, the suffix a short hash of (service, spec
hash, slot), so a re-run on the same snapshot changes nothing and a spec change yields new names;
`stateful` services get ordinals `<service>-0`, `<service>-1`… updated in place. Scaling down
removes the newest (stateless) or the highest ordinals (stateful) first; stateful ordinals one
at a time, each once the agents have let go of every higher one (`ordered_stop.py`). The rollout
controller (engine/rollout) steers spec changes through `derived/rollout/<tenant>/<service>`: see
`rollout_counts`, `rollout_build` and docs/controllers.md.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

from ccattler.engine.autoscale.effective import effective_service
from ccattler.engine.controllers.ordered_stop import OBSERVED, StopWindow, ordinal_of, removable, stop_window
from ccattler.engine.disruption.surge import surge
from ccattler.engine.facts import ServiceRef, derived_instance, instance_key, service_doc
from ccattler.engine.facts.keys import DESIRED_SERVICES, DISRUPTIONS, INSTANCES, ROLLOUTS, SCALE
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot

#: The fields of a service whose change needs a new container (everything the container is built from).
SPEC_FIELDS = ("image", "command", "env", "config", "resources", "secrets", "connections", "volumes", "init")

#: Suffix alphabet without vowels (no accidental words) and without look-alikes (0/o, 1/l, 3/e).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LENGTH = 5


def spec_hash(service: Mapping[str, Any]) -> str:
    """A stable hash of the fields of `service` that require a new container when they change."""
    spec = {name: service.get(name) for name in SPEC_FIELDS}
    data = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def instance_suffix(service: ServiceRef, spec: str, slot: int) -> str:
    """The deterministic suffix of a stateless instance: a short hash of service, spec and slot."""
    digest = int.from_bytes(hashlib.sha256(f"{service.full}\0{spec}\0{slot}".encode()).digest()[:8], "big")
    chars = []
    for _ in range(SUFFIX_LENGTH):
        digest, index = divmod(digest, len(_ALPHABET))
        chars.append(_ALPHABET[index])
    return "".join(chars)


def replica_count(service: Mapping[str, Any]) -> int | None:
    """The service's `instances` as a non-negative int, or None when the document is malformed."""
    count = service.get("instances", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return None
    return count


def rollout_counts(
    service: Mapping[str, Any], spec: str, rollout: Mapping[str, Any] | None
) -> dict[str, int]:
    """How many instances of each spec hash should exist.

    Without a rollout document every instance runs the current `spec`. A rollout document
    `{"spec": <hash being rolled out>, "counts": {<hash>: n, …}}` applies only while its `spec` is
    the current one (a stale document from an earlier change is ignored); counts for older specs
    only cap how many existing instances keep them (they are never created anew).
    """
    instances = replica_count(service) or 0
    if not rollout or rollout.get("spec") != spec:
        return {spec: instances}
    counts = {str(k): v for k, v in (rollout.get("counts") or {}).items() if isinstance(v, int) and v >= 0}
    counts.setdefault(spec, instances)
    return counts


def rollout_stale(spec: str, rollout: Mapping[str, Any] | None) -> bool:
    """A rollout document about another spec: the rollout controller has not seen the change yet,
    so the service's instances are held as they are (never all replaced at once meanwhile)."""
    return isinstance(rollout, Mapping) and rollout.get("spec") != spec


def rollout_build(
    service: Mapping[str, Any], spec: str, rollout: Mapping[str, Any] | None
) -> tuple[str, Mapping[str, Any]]:
    """(the spec new instances are built from, the fields they are built from): the current spec
    and the service, or after a rollback the previous spec and its fields from the document."""
    if not rollout or rollout.get("spec") != spec:
        return spec, service
    build = rollout.get("build")
    fields = (rollout.get("fields") or {}).get(build) if isinstance(build, str) else None
    if build == spec or not isinstance(fields, Mapping):
        return spec, service
    return str(build), fields


def rollout_drop(rollout: Mapping[str, Any] | None, spec: str) -> frozenset[str]:
    """Old-spec instances the rollout removes first (the unready ones, then those its budget allows)."""
    if not rollout or rollout.get("spec") != spec:
        return frozenset()
    return frozenset(str(name) for name in rollout.get("drop") or ())


class _Existing(NamedTuple):  # a NamedTuple: ten thousand of these are built per reconcile
    key: str
    name: str
    doc: Mapping[str, Any]
    mod_revision: int


class InstanceController:
    """Keeps `derived/instance/<tenant>/<service>/<instance>` in line with `desired/service/...`."""

    name: ClassVar[str] = "instance"
    timeless: ClassVar[bool] = True  # its changes follow the snapshot alone (not `now`)
    reads: ClassVar[tuple[str, ...]] = (DESIRED_SERVICES, INSTANCES, ROLLOUTS, SCALE, DISRUPTIONS, *OBSERVED)
    writes: ClassVar[tuple[str, ...]] = (INSTANCES,)

    def __init__(self) -> None:
        # service → the inputs it last reconciled to "no change". The same inputs give no change
        # again, so the service is skipped: a memo that never alters a result. With the runner's
        # cache, unchanged documents are the same objects, so comparing them is cheap.
        self._settled: dict[str, tuple[Any, ...]] = {}
        # The observed keys a pending ordered stop waits on (None: not known yet, wake on all).
        self._waiting: frozenset[str] | None = None

    def wakes_on(self, key: str, *change: Any) -> bool:
        """Whether a change of `key` (under `reads`) can change the result. Observed facts matter
        only while a stateful scale-down waits on them, so the thousands of other agent reports
        never wake this controller. Called from watch threads: it only reads one attribute."""
        if not key.startswith(OBSERVED):
            return True
        waiting = self._waiting
        return waiting is None or key in waiting or (bool(waiting) and key in OBSERVED)  # a re-list

    def depends_on(self, key: str) -> tuple[str, ...]:
        """An instance is derived from its service: commits are guarded by the service's revision."""
        tenant, service, _ = key[len(INSTANCES):].split("/", 2)
        return (f"{DESIRED_SERVICES}{tenant}/{service}", f"{ROLLOUTS}{tenant}/{service}",
                f"{DISRUPTIONS}{tenant}/{service}")

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        # One pass, grouped by the "tenant/service" text (cheaper than a ServiceRef per instance).
        services: dict[str, Mapping[str, Any]] = {}
        existing: dict[str, list[_Existing]] = defaultdict(list)
        mods = snapshot.mod_revisions
        for key, doc in snapshot.values.items():
            if key.startswith(INSTANCES):
                full, _, name = key[len(INSTANCES):].rpartition("/")
                existing[full].append(_Existing(key, name, doc, mods.get(key, 0)))
            elif key.startswith(DESIRED_SERVICES):
                services[key[len(DESIRED_SERVICES):]] = doc

        puts: dict[str, Any] = {}
        deletes: set[str] = set()
        groups: list[frozenset[str]] = []
        settled: dict[str, tuple[Any, ...]] = {}
        waiting: set[str] = set()
        # group → the keys a drain creates (its surge) and removes of the group's members: one
        # commit, so a seat's members appear (and go) together (engine/disruption/group_drain.py)
        seats: dict[str, list[str]] = defaultdict(list)
        for full in sorted(services.keys() | existing.keys()):
            service = services.get(full)
            have = existing.get(full, [])
            if service is None:
                deletes.update(inst.key for inst in have)
                continue
            service = effective_service(service, snapshot.get(SCALE + full))  # the autoscaler's count
            if replica_count(service) is None:
                continue  # malformed (admission should have refused it): leave its instances alone
            rollout = snapshot.get(ROLLOUTS + full)
            if have and rollout_stale(spec_hash(service), rollout):
                continue  # the rollout controller steps the change (it runs first in a round)
            disruption = snapshot.get(DISRUPTIONS + full)  # a drain's surge and removals
            ref = ServiceRef(*full.split("/", 1))
            inputs = (service, rollout, {inst.key: inst.doc for inst in have}, disruption)
            before = self._settled.get(full)
            same = before is not None and before[:4] == inputs
            # Agents' reports are an input only while a stateful scale-down is pending (a window),
            # and whether one is pending follows from the other inputs: no need to look otherwise.
            window = None
            if service.get("stateful") and not (same and before[4] is None):
                ordinals = (ordinal_of(ref.name, inst.name, inst.doc) for inst in have)
                window = stop_window(snapshot, ref, replica_count(service) or 0,
                                     [o for o in ordinals if o is not None])
                if window is not None:
                    waiting.update(window.keys)
            inputs = (*inputs, window)
            if same and before[4] == window:
                settled[full] = inputs
                continue
            changes_before = len(puts) + len(deletes)
            if service.get("stateful"):
                _stateful(ref, service, rollout, have, window, puts, deletes)
            else:
                drained = _stateless(ref, service, rollout, have, puts, deletes, groups, disruption)
                if drained and isinstance(service.get("group"), str):
                    seats[service["group"]].extend(drained)
            if len(puts) + len(deletes) == changes_before:
                settled[full] = inputs
        groups.extend(frozenset(keys) for _, keys in sorted(seats.items()) if len(keys) > 1)
        self._settled = settled
        self._waiting = frozenset(waiting)  # set before the commit: the reports it waits on come after
        return ChangeSet(puts=puts, deletes=frozenset(deletes), groups=tuple(groups))


def _document(ref: ServiceRef, service: Mapping[str, Any], spec: str, name: str, ordinal: int | None) -> dict:
    resources = service_doc.resources(service)
    return {
        "service": ref.full,
        "name": name,
        "ordinal": ordinal,
        "spec": spec,
        "image": service.get("image"),
        "resources": {"cpu": int(resources.get("cpu", 0)), "memory": int(resources.get("memory", 0))},
    }


def _oldest_first(instances: list[_Existing]) -> list[_Existing]:
    # Stateless documents are never rewritten, so mod_revision is their creation revision.
    return sorted(instances, key=lambda inst: (inst.mod_revision, inst.name))


def _stateless(
    ref: ServiceRef,
    service: Mapping[str, Any],
    rollout: Mapping[str, Any] | None,
    have: list[_Existing],
    puts: dict[str, Any],
    deletes: set[str],
    groups: list[frozenset[str]],
    disruption: Mapping[str, Any] | None = None,
) -> list[str]:
    """Returns the keys a drain's document created (surge) or removed."""
    spec = spec_hash(service)
    counts = rollout_counts(service, spec, rollout)
    build, source = rollout_build(service, spec, rollout)
    drop = rollout_drop(rollout, spec)
    # A drain (engine/disruption): surge instances on top, and the drained ones it removes.
    counts, have, evicted = surge(counts, build, have, [inst.name for inst in have], disruption)
    by_spec: dict[str, list[_Existing]] = defaultdict(list)
    removed: list[str] = [inst.key for inst in evicted]
    taken = {inst.name for inst in evicted}
    for inst in have:
        if derived_instance.ordinal(inst.doc) is None:
            by_spec[str(derived_instance.spec(inst.doc))].append(inst)
        else:  # left over from when the service was stateful
            removed.append(inst.key)
    kept_current = 0
    for old_spec, instances in by_spec.items():
        keep = counts.get(old_spec, 0)
        ordered = _oldest_first(instances)
        if drop:  # the ones the rollout drops go first
            ordered = sorted(ordered, key=lambda inst: inst.name in drop)
        removed.extend(inst.key for inst in ordered[keep:])
        if old_spec == build:
            kept_current = min(keep, len(ordered))
            for inst in ordered[:keep]:  # rewrite a current-spec document only if its shape is stale
                want = _document(ref, source, build, inst.name, None)
                if dict(inst.doc) != want:
                    puts[inst.key] = want

    taken |= {inst.name for inst in have}
    created: list[str] = []
    slot = 0
    while len(created) < counts.get(build, 0) - kept_current:
        name = f"{ref.name}-{instance_suffix(ref, build, slot)}"
        slot += 1
        if name in taken:
            continue
        taken.add(name)
        key = instance_key(ref, name)
        puts[key] = _document(ref, source, build, name, None)
        created.append(key)

    # A replaced instance and its replacement commit together: never a moment with neither.
    removed.sort()
    for old, new in zip(removed, created, strict=False):
        groups.append(frozenset((old, new)))
    deletes.update(removed)
    return [*created, *(inst.key for inst in evicted)] if isinstance(disruption, Mapping) else []


def _stateful(
    ref: ServiceRef,
    service: Mapping[str, Any],
    rollout: Mapping[str, Any] | None,
    have: list[_Existing],
    window: StopWindow | None,
    puts: dict[str, Any],
    deletes: set[str],
) -> None:
    spec = spec_hash(service)
    counts = rollout_counts(service, spec, rollout)
    build, source = rollout_build(service, spec, rollout)
    total = replica_count(service) or 0
    by_ordinal: dict[int, _Existing] = {}
    beyond: dict[int, str] = {}
    for inst in have:
        ordinal = ordinal_of(ref.name, inst.name)
        if ordinal is not None and ordinal < total:
            by_ordinal[ordinal] = inst  # rewritten below if its document is stale
        elif ordinal is not None and ordinal_of(ref.name, inst.name, inst.doc) is not None:
            beyond[ordinal] = inst.key  # beyond the count: goes in order
        else:
            deletes.add(inst.key)  # not an ordinal (left from a stateless period): nothing to order
    if window is not None:
        deletes.update(beyond[ordinal] for ordinal in removable(window, beyond.keys()))
    # Lowest ordinals keep an older spec the rollout still allows, so updates proceed from the top.
    kept_old: dict[str, int] = defaultdict(int)
    for ordinal in range(total):
        name = f"{ref.name}-{ordinal}"
        inst = by_ordinal.get(ordinal)
        old_spec = str(derived_instance.spec(inst.doc)) if inst else None
        if inst and old_spec != build and kept_old[old_spec] < counts.get(old_spec, 0):
            kept_old[old_spec] += 1
            continue
        want = _document(ref, source, build, name, ordinal)
        if inst is None or dict(inst.doc) != want:
            puts[instance_key(ref, name)] = want
