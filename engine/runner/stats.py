"""Counters the runner keeps per controller (plain attributes; the API server exports them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(slots=True)
class ControllerStats:
    """What one controller's runs did since the runner started."""

    reconciles: int = 0
    commits: int = 0  # successful transactions
    committed_ops: int = 0  # puts and deletes written
    conflicts: int = 0  # commits refused by a guard (then retried)
    fenced: int = 0  # commits refused because leadership was lost (the leader key moved on)
    dropped_writes: int = 0  # keys outside the controller's write domain
    noop_writes: int = 0  # puts of the stored value, deletes of absent keys
    errors: int = 0  # reconcile or commit raised
    reconcile_seconds_sum: float = 0.0
    reconcile_seconds_max: float = 0.0
    last_reconcile_seconds: float = 0.0
    last_revision: int = 0  # the revision of the last commit
    watch_wait_seconds_sum: float = 0.0  # waiting for its own commits to come back through the watch

    def observe(self, seconds: float) -> None:
        self.reconciles += 1
        self.reconcile_seconds_sum += seconds
        self.reconcile_seconds_max = max(self.reconcile_seconds_max, seconds)
        self.last_reconcile_seconds = seconds

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)
