"""One controller step: reconcile a snapshot, prune the change set, commit it guarded; used by both
the live runner and the offline `settle`."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ccattler.engine.facts.snapshot import Controller, Snapshot
from ccattler.engine.runner.changes import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_OPS,
    CommitResult,
    Pruned,
    commit,
    plan_batches,
    prune,
)
from ccattler.engine.runner.stats import ControllerStats
from ccattler.engine.store.base import Compare, Store


@dataclass(frozen=True, slots=True)
class StepResult:
    """The pruned change set and, when there was something to write, how the commit went."""

    pruned: Pruned
    result: CommitResult | None

    @property
    def changed(self) -> bool:
        return self.result is not None and self.result.committed_ops > 0

    @property
    def conflict(self) -> bool:
        return self.result is not None and self.result.conflict


def step(
    store: Store,
    controller: Controller,
    snapshot: Snapshot,
    now: float,
    stats: ControllerStats,
    *,
    fence: Compare | None = None,
    max_ops: int = DEFAULT_MAX_OPS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> StepResult:
    """Reconcile `snapshot` with `controller` and commit what changed, counting into `stats`."""
    started = time.perf_counter()
    changes = controller.reconcile(snapshot, now)
    stats.observe(time.perf_counter() - started)
    pruned = prune(changes, snapshot, controller.writes)
    stats.dropped_writes += len(pruned.dropped)
    stats.noop_writes += pruned.noops
    if not pruned.changes:
        return StepResult(pruned, None)
    batches = plan_batches(
        pruned.changes,
        snapshot,
        depends_on=getattr(controller, "depends_on", None),
        fence=fence,
        max_ops=max_ops,
        max_bytes=max_bytes,
    )
    result = commit(store, batches, pruned.changes)
    stats.commits += result.transactions
    stats.committed_ops += result.committed_ops
    if result.revision is not None:
        stats.last_revision = result.revision
    if result.conflict:
        stats.conflicts += 1
    return StepResult(pruned, result)
