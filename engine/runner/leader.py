"""Leader election on a store lease: the runner that holds `leader/runner` is the one that acts.

A candidate creates the key bound to its own lease, only if absent (compare mod_revision 0), and
keeps the lease alive every `ttl / 3`. It steps down as soon as a keepalive fails, the key is no
longer the one it created, or the store has been unreachable for a whole `ttl`, and then waits
`ttl / 3` before campaigning again, so a healthy follower (woken by the key's deletion) wins.
The key's mod_revision is the fencing token: the runner guards every commit with it (`fence`).
Identities must be unique among live runners; a stable one (e.g. per state directory) lets a
restarted server take over the key its crashed predecessor left instead of waiting out its TTL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ccattler.engine.facts.keys import LEADER_RUNNER
from ccattler.engine.store.base import Compare, LeaseNotFound, Store, StoreError

log = logging.getLogger(__name__)


class LeaderElection:
    """Campaigns for `leader/runner` in a thread; `on_change(is_leader)` is called on each change."""

    def __init__(
        self,
        store: Store,
        identity: str,
        *,
        ttl: float = 10.0,
        on_change: Callable[[bool], None] = lambda leader: None,
    ) -> None:
        self._store = store
        self.identity = identity
        self.ttl = ttl
        self._on_change = on_change
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._lease: int | None = None
        self._fence: Compare | None = None
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        return self._fence is not None

    @property
    def fence(self) -> Compare | None:
        """The guard every leader commit carries, or None when not leading."""
        return self._fence

    @property
    def lease(self) -> int | None:
        return self._lease

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop campaigning and give leadership up (revoking the lease frees the key at once)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, self.ttl))
        self._step_down(revoke=True)

    def lost(self) -> None:
        """The store refused a commit guarded by our fence: another runner leads; step down now
        (the lease is let go, not revoked: the key is no longer ours to free)."""
        if self._fence is not None:
            log.warning("runner %s: fenced out; stepping down", self.identity)
            self._step_down(revoke=False)

    def _run(self) -> None:
        period = self.ttl / 3
        last_ok = time.monotonic()
        while not self._stopped.is_set():
            try:
                if self._fence is None:
                    if not self._campaign():
                        self._wait_for_vacancy(period)
                        continue
                    last_ok = time.monotonic()
                else:
                    self._stopped.wait(period)
                    if self._stopped.is_set():
                        break
                    self._store.lease_keepalive(self._lease)
                    fact = self._store.get(LEADER_RUNNER)
                    if fact is None or fact.mod_revision != self._fence.mod_revision:
                        log.warning("runner %s: leader key changed hands; stepping down", self.identity)
                        self._step_down(revoke=True)
                        self._stopped.wait(period)
                        continue
                    last_ok = time.monotonic()
            except LeaseNotFound:
                log.warning("runner %s: leader lease expired; stepping down", self.identity)
                self._step_down(revoke=False)
                # Let a healthy peer (woken by the key's deletion) win before campaigning again.
                self._stopped.wait(period)
            except StoreError as exc:
                if self._fence is not None and time.monotonic() - last_ok >= self.ttl:
                    log.warning("runner %s: store unreachable for %.1fs (%s); stepping down",
                                self.identity, self.ttl, exc)
                    self._step_down(revoke=False)
                self._stopped.wait(min(1.0, period))
            except Exception:  # never let the election thread die silently while holding the key
                log.exception("runner %s: leader election failed; stepping down", self.identity)
                self._step_down(revoke=True)
                self._stopped.wait(period)

    def _campaign(self) -> bool:
        held = self._store.get(LEADER_RUNNER)
        holder = held.value.get("identity") if held is not None and isinstance(held.value, dict) else None
        if held is not None and holder != self.identity:
            return False
        # A key under our own identity is a previous incarnation of this runner that died without
        # revoking its lease (identities are unique among live runners): take it over at once.
        lease = self._store.lease_grant(self.ttl)
        ok, revision = self._store.txn(
            [Compare(LEADER_RUNNER, held.mod_revision if held else 0)],
            [(LEADER_RUNNER, {"identity": self.identity})], (), lease=lease,
        )
        if not ok:
            self._store.lease_revoke(lease)
            return False
        if held is not None and held.lease:
            log.info("runner %s: took leadership over from a previous incarnation", self.identity)
            try:
                self._store.lease_revoke(held.lease)  # it holds nothing any more
            except StoreError:
                pass
        with self._lock:
            self._lease, self._fence = lease, Compare(LEADER_RUNNER, revision)
        log.info("runner %s: elected leader at revision %d", self.identity, revision)
        self._on_change(True)
        return True

    def _wait_for_vacancy(self, timeout: float) -> None:
        """Sleep until the leader key is deleted (its lease expired or was revoked) or `timeout`."""
        if self._store.get(LEADER_RUNNER) is None:
            return
        watch = self._store.watch(LEADER_RUNNER)
        try:
            deadline = time.monotonic() + timeout
            while not self._stopped.is_set() and (left := deadline - time.monotonic()) > 0:
                event = watch.get(timeout=min(left, 0.5))
                if event is not None and event.key == LEADER_RUNNER and event.kind != "put":
                    return
        finally:
            watch.cancel()

    def _step_down(self, *, revoke: bool) -> None:
        with self._lock:
            lease, was_leader = self._lease, self._fence is not None
            self._lease = self._fence = None
        if revoke and lease is not None:
            try:
                self._store.lease_revoke(lease)
            except StoreError:
                pass  # expired already, or the store is gone: either way the key goes with the lease
        if was_leader:
            self._on_change(False)
