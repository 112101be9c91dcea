"""Offline settling: run controllers in order over a store until a full round changes nothing.

`cca plan` uses this over a `sqlite://:memory:` store: no watches, no leader, each snapshot read
at one revision. `max_rounds` bounds the search for a fixed point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ccattler.engine.facts import CcaError
from ccattler.engine.facts.snapshot import Controller
from ccattler.engine.runner.changes import DEFAULT_MAX_BYTES
from ccattler.engine.runner.snapshot import read_snapshot
from ccattler.engine.runner.stats import ControllerStats
from ccattler.engine.runner.step import step
from ccattler.engine.store.base import Store

#: Offline commits go to an embedded store; this only keeps one transaction's memory bounded.
SETTLE_MAX_OPS = 10_000
#: Guard conflicts cannot happen offline unless another writer shares the store; give up after this.
MAX_CONFLICTS = 5


class NoFixedPoint(CcaError):
    """Controllers kept changing the store for `max_rounds` rounds."""


@dataclass(frozen=True, slots=True)
class SettleResult:
    """How settling went: rounds run (the last one changed nothing), the final revision, and per
    controller what it did."""

    rounds: int
    revision: int
    stats: dict[str, ControllerStats] = field(default_factory=dict)
    dropped: dict[str, tuple[str, ...]] = field(default_factory=dict)


def settle(
    store: Store,
    controllers: Sequence[Controller],
    now: float,
    max_rounds: int = 20,
    *,
    max_ops: int = SETTLE_MAX_OPS,
) -> SettleResult:
    """Run `controllers` in order, round after round, until one full round changes nothing."""
    stats = {c.name: ControllerStats() for c in controllers}
    dropped: dict[str, set[str]] = {c.name: set() for c in controllers}
    last_changes: list[str] = []
    frozen: dict[str, tuple[int, object]] = {}  # one frozen value per key and revision, for every step
    for round_number in range(1, max_rounds + 1):
        last_changes = []
        for controller in controllers:
            for _attempt in range(MAX_CONFLICTS):
                snapshot = read_snapshot(store, controller.reads, frozen)
                outcome = step(store, controller, snapshot, now, stats[controller.name],
                               max_ops=max_ops, max_bytes=DEFAULT_MAX_BYTES)
                dropped[controller.name].update(outcome.pruned.dropped)
                if outcome.changed:
                    last_changes.append(f"{controller.name} ({len(outcome.pruned.changes)} changes)")
                if not outcome.conflict:
                    break
            else:
                raise NoFixedPoint(
                    f"controller {controller.name!r} kept conflicting with another writer of the store"
                )
        if not last_changes:
            return SettleResult(
                round_number, store.revision(), stats, {k: tuple(sorted(v)) for k, v in dropped.items() if v}
            )
    raise NoFixedPoint(
        f"controllers did not settle within {max_rounds} rounds; the last round still changed: "
        + ", ".join(last_changes)
    )
