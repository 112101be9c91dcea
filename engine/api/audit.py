"""Audit records at `audit/<time>-<request id>`: who asked for what, and what was decided.

Every security-relevant call (apply, delete, policy, secret, token, user, join, denials) writes one.
`AuditLog` keeps the newest `keep` records: every `prune_every` writes it deletes older ones.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import asdict, dataclass
from typing import Any

from ccattler.engine.store import Store

DEFAULT_KEEP = 100_000
#: Characters of a record's object and reason: longer ones are summarised, never dropped.
MAX_OBJECT_CHARS = 2_000
MAX_REASON_CHARS = 2_000
#: File names a record lists before it summarises the rest as a count.
_FILES_SHOWN = 20
_FILES_CHARS = 1_500
#: Deletes per transaction when pruning (under etcd's default limit of 128 operations).
_PRUNE_BATCH = 100


@dataclass(frozen=True, slots=True)
class AuditRecord:
    request_id: str
    time: float
    principal: str
    verb: str
    object: str
    decision: str  # "requested" (written before the call runs) → "allowed" | "denied" | "failed"
    reason: str = ""

    @property
    def key(self) -> str:
        return f"audit/{int(self.time * 1_000_000):020d}-{self.request_id}"


class AuditLog:
    """Writes audit records and bounds how many the store keeps."""

    def __init__(self, store: Store, keep: int = DEFAULT_KEEP, prune_every: int = 1000) -> None:
        self.store, self.keep, self.prune_every = store, keep, prune_every
        self._writes = itertools.count(1)
        self._pruning = threading.Lock()

    def record(self, entry: AuditRecord) -> None:
        self.store.put(entry.key, asdict(entry))
        if next(self._writes) % self.prune_every == 0 and self._pruning.acquire(blocking=False):
            try:
                self.prune()
            finally:
                self._pruning.release()

    def prune(self) -> int:
        """Delete all but the newest `keep` records; returns how many went."""
        facts, _ = self.store.range("audit/")
        old = [f.key for f in facts[: max(0, len(facts) - self.keep)]]
        for start in range(0, len(old), _PRUNE_BATCH):
            self.store.txn((), (), old[start:start + _PRUNE_BATCH])
        return len(old)


def summarise_files(paths: list[str]) -> str:
    """`files a, b, …`: names while they fit `_FILES_CHARS` (each cut to 200), then
    `(+N more, M in all)`, so a record never outgrows `MAX_OBJECT_CHARS`."""
    shown: list[str] = []
    used = 0
    for path in paths[:_FILES_SHOWN]:
        name = bounded(path, 200)
        if shown and used + len(name) > _FILES_CHARS:
            break
        shown.append(name)
        used += len(name) + 2
    rest = len(paths) - len(shown)
    return "files " + ", ".join(shown) + (f" (+{rest} more, {len(paths)} in all)" if rest > 0 else "")


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def recent(store: Store, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` records, oldest first."""
    facts, _ = store.range("audit/")
    return [f.value for f in facts[-limit:]] if limit > 0 else [f.value for f in facts]
