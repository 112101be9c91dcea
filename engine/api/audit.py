"""Audit records at `audit/<time>-<request id>`: who asked for what, and what was decided.

Every security-relevant call (apply, delete, policy, secret, token, user, join, denials) writes one.
Retention: `AuditLog` keeps the newest `keep` records and none older than `max_age` seconds
(0: no age limit), pruned every `prune_every` writes and by `start_pruning`'s timer. Every write
also goes to the file sink when there is one (`audit_file.AuditFile`, JSON lines).

Coalescing (`record_once`): a call repeated with the same outcome — an agent's periodic secret
refresh fetching the same values — writes a record only when what it delivered differs from the
last record for the same principal, verb and object, or `coalesce_seconds` after it, so an idle
cluster adds about one record per node per hour instead of one per refresh. Each record thus stands
for every identical delivery after it until the next record for that principal and object.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ccattler.engine.api.audit_file import AuditFile
from ccattler.engine.facts.keys import AUDIT
from ccattler.engine.store import Store

log = logging.getLogger("ccattler.api.audit")

DEFAULT_KEEP = 100_000
DEFAULT_MAX_AGE = 0.0  # seconds; 0 keeps records whatever their age (`keep` still bounds them)
DEFAULT_COALESCE_SECONDS = 3600.0
#: Identities (principal, verb, object) whose last outcome is remembered for coalescing.
_COALESCE_MAX = 10_000
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
        return f"{AUDIT}{_key_time(self.time)}-{self.request_id}"


class AuditLog:
    """Writes audit records (to the store, then the file sink) and bounds what the store keeps."""

    def __init__(self, store: Store, keep: int = DEFAULT_KEEP, prune_every: int = 1000,
                 max_age: float = DEFAULT_MAX_AGE, sink: AuditFile | None = None,
                 coalesce_seconds: float = DEFAULT_COALESCE_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.keep, self.prune_every = store, keep, prune_every
        self.max_age, self.sink, self.coalesce_seconds, self.clock = max_age, sink, coalesce_seconds, clock
        self.coalesced = 0  # calls whose record an earlier identical one stands for
        self._writes = itertools.count(1)
        self._pruning = threading.Lock()
        self._seen: dict[tuple[str, str, str], tuple[str, float]] = {}
        self._seen_lock = threading.Lock()
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None

    def record(self, entry: AuditRecord) -> None:
        """Write `entry` to the store (raises when it cannot: the caller fails closed), then to the
        sink (a failure there is logged, never raised: the store holds the record)."""
        value = asdict(entry)
        self.store.put(entry.key, value)
        if self.sink is not None:
            self.sink.write(value)
        if next(self._writes) % self.prune_every == 0:
            self._prune_quietly()

    def record_once(self, entry: AuditRecord, outcome: str) -> bool:
        """`record(entry)` unless the last record for its principal, verb and object had the same
        `outcome` (a digest of what was delivered, or the error) less than `coalesce_seconds` ago.
        True when written; raises as `record` does."""
        identity = (entry.principal, entry.verb, entry.object)
        now = self.clock()
        with self._seen_lock:
            last = self._seen.get(identity)
            if last is not None and last[0] == outcome and now - last[1] < self.coalesce_seconds:
                self.coalesced += 1
                return False
        self.record(entry)
        with self._seen_lock:
            if len(self._seen) >= _COALESCE_MAX and identity not in self._seen:
                self._seen.clear()  # forgetting only costs one extra record per identity
            self._seen[identity] = (outcome, now)
        return True

    def prune(self) -> int:
        """Delete all but the newest `keep` records, and those older than `max_age`; how many went."""
        facts, _ = self.store.range(AUDIT)
        cut = max(0, len(facts) - self.keep)
        if self.max_age > 0:
            oldest = _key_time(self.clock() - self.max_age)
            while cut < len(facts) and facts[cut].key[len(AUDIT):][:20] < oldest:
                cut += 1
        old = [f.key for f in facts[:cut]]
        for start in range(0, len(old), _PRUNE_BATCH):
            self.store.txn((), (), old[start:start + _PRUNE_BATCH])
        return len(old)

    def start_pruning(self, every: float = 60.0) -> None:
        """Prune on a timer too, so an idle cluster's old records go when `max_age` says."""
        def run() -> None:
            while not self._stop.wait(every):
                self._prune_quietly()

        self._timer = threading.Thread(target=run, name="cca-audit-prune", daemon=True)
        self._timer.start()

    def close(self) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.join(timeout=5)
        if self.sink is not None:
            self.sink.close()

    def _prune_quietly(self) -> None:
        if not self._pruning.acquire(blocking=False):
            return
        try:
            self.prune()
        except Exception:  # the records stay a while longer; the next prune tries again
            log.exception("could not prune audit records")
        finally:
            self._pruning.release()


def _key_time(seconds: float) -> str:
    """The time part of a record key (`AuditRecord.key`) at `seconds`."""
    return f"{int(max(0.0, seconds) * 1_000_000):020d}"


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
    facts, _ = store.range(AUDIT)
    return [f.value for f in facts[-limit:]] if limit > 0 else [f.value for f in facts]
