"""Small controllers for runner tests (importable as `runner_builders`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

from ccattler.engine.facts.snapshot import ChangeSet, Snapshot

#: Leader and node lease TTL in the live tests (seconds).
TTL = 2.0


def eventually(condition, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


@dataclass
class Copy:
    """Copies every `in/<k>` to `out/<k>` (deleting orphans); optionally also writes a stray key."""

    name: ClassVar[str] = "copy"
    reads: ClassVar[tuple[str, ...]] = ("in/", "out/")
    writes: ClassVar[tuple[str, ...]] = ("out/",)
    stray: str | None = None
    group_size: int = 1
    calls: list[int] = field(default_factory=list)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        self.calls.append(snapshot.revision)
        want = {f"out/{k[3:]}": v for k, v in snapshot.under("in/")}
        puts = dict(want)
        if self.stray:
            puts[self.stray] = {"x": 1}
        deletes = frozenset(k for k, _ in snapshot.under("out/") if k not in want)
        keys = sorted(puts.keys() | deletes)
        groups = tuple(
            frozenset(keys[i : i + self.group_size]) for i in range(0, len(keys), self.group_size)
        ) if self.group_size > 1 else ()
        return ChangeSet(puts, deletes, groups)
