"""One step of a rolling update, as pure arithmetic over a service's instances.

Stateless: surge up to `max_extra` new-spec instances above the desired count; remove old ones
only while the ready instances stay at or above `min_ready` — the larger of the disruption floor
(engine/disruption/budget.py) and `instances − update.max_unavailable` — unready old ones first
(removing them costs no readiness). Stateful: the highest old ordinal first, one at a time, each
once every updated ordinal is ready and the budget allows taking it down. A step that can do
nothing says why (`reason`), as data: `waiting` is the code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ccattler.engine.disruption import budget

#: The language's defaults (shared/LANGUAGE.md, `update`).
DEFAULT_MAX_EXTRA = 1
DEFAULT_MAX_UNAVAILABLE = 1
DEFAULT_DEADLINE_MS = 600_000
#: Failures of new-spec instances (failed starts, crashes, failed startup/liveness probes) that roll back.
MAX_FAILURES = 3


@dataclass(frozen=True, slots=True)
class Member:
    """One instance as a rollout sees it."""

    name: str
    spec: str | None
    ready: bool
    ordinal: int | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    """A service's rollout knobs, read once from its document."""

    instances: int
    max_extra: int = DEFAULT_MAX_EXTRA
    max_unavailable: int = DEFAULT_MAX_UNAVAILABLE
    floor: int = 0
    stateful: bool = False
    deadline_ms: int = DEFAULT_DEADLINE_MS

    @property
    def min_ready(self) -> int:
        """Ready instances a removal must leave (never more than `instances`)."""
        return min(self.instances, max(self.floor, self.instances - self.max_unavailable))


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def policy_of(service: Mapping[str, object], instances: int) -> Policy:
    update = service.get("update") if isinstance(service.get("update"), Mapping) else {}
    assert isinstance(update, Mapping)
    return Policy(instances, _count(update.get("max_extra"), DEFAULT_MAX_EXTRA),
                  _count(update.get("max_unavailable"), DEFAULT_MAX_UNAVAILABLE),
                  budget.floor({**service, "instances": instances}), bool(service.get("stateful")),
                  _count(update.get("deadline"), DEFAULT_DEADLINE_MS))


@dataclass(frozen=True, slots=True)
class Step:
    """What the instance controller should hold: `counts` per spec hash and the old instances to
    `drop` first; `done` once no old instance is left and every new one is ready; otherwise
    `waiting` (a code) and `reason` (a sentence) say what it waits for."""

    counts: dict[str, int] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    done: bool = False
    waiting: str | None = None
    reason: str | None = None
    switched: tuple[str, ...] = ()  # stateful ordinals updated by this step


def step(policy: Policy, spec: str, members: Sequence[Member]) -> Step:
    """The next step towards every instance running `spec`."""
    if policy.stateful:
        return _stateful(policy, spec, members)
    return _stateless(policy, spec, members)


def _stateless(policy: Policy, spec: str, members: Sequence[Member]) -> Step:
    n = policy.instances
    old = [m for m in members if m.spec != spec]
    new = [m for m in members if m.spec == spec]
    new_ready = sum(m.ready for m in new)
    if not old:
        if new_ready >= n and len(new) >= n:
            return Step({spec: n}, done=True)
        return Step({spec: n}, waiting="new-unready",
                    reason=f"waiting for {n - new_ready} new instance(s) to be ready")
    ready = sum(m.ready for m in members)
    drop = sorted(m.name for m in old if not m.ready)  # unready first: they cost nothing
    removable = max(0, ready - policy.min_ready)
    drop += sorted(m.name for m in old if m.ready)[:removable]
    old_after = len(old) - len(drop)
    target = min(n, max(0, n + policy.max_extra - old_after))
    counts = dict(Counter(m.spec for m in old if m.name not in drop))
    counts = {str(s): c for s, c in sorted(counts.items(), key=lambda kv: str(kv[0]))}
    counts[spec] = target
    if drop or target > len(new):
        return Step(counts, tuple(drop))
    if new_ready < len(new):
        return Step(counts, waiting="new-unready",
                    reason=f"waiting for {len(new) - new_ready} new instance(s) to be ready "
                           f"(ready {ready}, floor {policy.min_ready})")
    return Step(counts, waiting="no-budget",
                reason=f"neither surge nor removal is possible: ready {ready} = floor "
                       f"{policy.min_ready} of {n}, max_extra {policy.max_extra} "
                       f"({len(members) - n} extra running)")


def _stateful(policy: Policy, spec: str, members: Sequence[Member]) -> Step:
    n = policy.instances
    ordinals = sorted((m for m in members if m.ordinal is not None and m.ordinal < n),
                      key=lambda m: m.ordinal or 0)
    pending = [m for m in ordinals if m.spec != spec]
    updated = [m for m in ordinals if m.spec == spec]
    kept = Counter(str(m.spec) for m in pending)
    if not pending:
        if all(m.ready for m in updated) and len(updated) >= n:
            return Step({spec: n}, done=True)
        return Step({spec: n}, waiting="new-unready", reason="waiting for the updated ordinals to be ready")
    unready = [m.name for m in updated if not m.ready]
    if unready:
        return Step({**kept, spec: n}, waiting="new-unready",
                    reason=f"stateful: one ordinal at a time; waiting for {unready[0]} to be ready")
    top = pending[-1]  # the highest ordinal still on an old spec
    ready = sum(m.ready for m in ordinals)
    if top.ready and ready - 1 < policy.floor:
        return Step({**kept, spec: n}, waiting="no-budget",
                    reason=f"stateful: updating {top.name} would leave {ready - 1} ready, below the "
                           f"floor {policy.floor}")
    kept[str(top.spec)] -= 1
    return Step({**kept, spec: n}, switched=(top.name,))
