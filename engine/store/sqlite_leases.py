"""The SQLite store's leases in memory: each lease's TTL and deadline, under a lock of their own so
a keepalive never waits behind a write in progress (a node whose heartbeat queued behind a long
commit would lose its lease). The table is persisted by the store (the `leases` table holds the
TTLs; deadlines restart with the full TTL on open, as etcd's do after a leader change).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from ccattler.engine.store.base import LeaseNotFound

log = logging.getLogger(__name__)

#: How late the expiry wait may return before the delay counts as a stall of the whole process.
STALL_GRACE = 1.0
#: The most a pardon (`LeaseTable.pardon`) may extend a lease: its deadline never passes its last
#: keepalive + TTL + this many TTLs, however long the caller keeps stalling.
MAX_PARDON_TTLS = 1.0


class LeaseTable:
    """lease → (ttl, deadline). `wait_due` is the expiry thread's wait; the store drops what it
    returns (re-checking `expired` once it holds its write lock). `_renewed` holds each lease's
    last grant or keepalive, which bounds `pardon`."""

    def __init__(self, ttls: Iterable[tuple[int, float]]) -> None:
        now = time.monotonic()
        self._entries: dict[int, tuple[float, float]] = {lease: (ttl, now + ttl) for lease, ttl in ttls}
        self._renewed: dict[int, float] = dict.fromkeys(self._entries, now)
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._closed = False

    def __contains__(self, lease: object) -> bool:
        return lease in self._entries

    def grant(self, lease: int, ttl: float) -> None:
        with self._lock:
            now = time.monotonic()
            self._entries[lease], self._renewed[lease] = (ttl, now + ttl), now
            self._wakeup.notify_all()

    def keepalive(self, lease: int) -> None:
        with self._lock:
            if lease not in self._entries:
                raise LeaseNotFound(f"lease {lease} does not exist (expired or revoked)")
            ttl = self._entries[lease][0]
            now = time.monotonic()
            self._entries[lease], self._renewed[lease] = (ttl, now + ttl), now

    def pardon(self, seconds: float) -> int:
        """The keepalives' server could not serve them for `seconds` (its event loop lagged): move
        every deadline on by that much — but never past last keepalive + TTL · (1 +
        MAX_PARDON_TTLS), so a client that really stopped still expires, at most one TTL late even
        if the server keeps lagging. Returns how many leases were moved."""
        if seconds <= 0:
            return 0
        moved = 0
        with self._lock:
            for lease, (ttl, deadline) in self._entries.items():
                latest = self._renewed.get(lease, deadline - ttl) + ttl * (1 + MAX_PARDON_TTLS)
                later = min(deadline + seconds, latest)
                if later > deadline:
                    self._entries[lease] = (ttl, later)
                    moved += 1
        return moved

    def remove(self, lease: int) -> None:
        with self._lock:
            self._entries.pop(lease, None)
            self._renewed.pop(lease, None)

    def expired(self, lease: int) -> bool:
        with self._lock:
            entry = self._entries.get(lease)
        return entry is not None and entry[1] <= time.monotonic()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wakeup.notify_all()

    def wait_due(self) -> list[int] | None:
        """Wait until some lease is past its deadline; those leases (None once closed).

        When the wait itself returns late, the whole process was stalled (GIL starvation, swap,
        a suspended VM): keepalives could not be served either, so the clients get their full TTL
        again from now, as etcd gives them after a leader change — rather than every node losing
        its lease at once.
        """
        with self._lock:
            planned: float | None = None
            while not self._closed:
                now = time.monotonic()
                if planned is not None and now - planned > STALL_GRACE:
                    log.warning("sqlite store: lease expiry ran %.1f s late (the process stalled); "
                                "every lease gets its TTL again", now - planned)
                    self._entries = {lease: (ttl, now + ttl) for lease, (ttl, _) in self._entries.items()}
                    self._renewed = dict.fromkeys(self._entries, now)
                due = [lease for lease, (_ttl, deadline) in self._entries.items() if deadline <= now]
                if due:
                    return due
                timeout = min(d for _t, d in self._entries.values()) - now + 0.001 if self._entries else None
                planned = now + timeout if timeout is not None else None
                if self._wakeup.wait(timeout):
                    planned = None  # woken early (a new lease): not a stall
            return None
