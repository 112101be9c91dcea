"""The live runner: while it leads, runs controllers on watch events (debounced) and a periodic resync.

Snapshots come from a watch-fed `FactCache`; commits are guarded (changed keys, their inputs, the
leader fence) and retried with jittered exponential backoff on conflict. Knobs: `debounce`
(default 30 ms), `resync_interval` (30 s), `settled_resync_interval` (300 s), `leader_ttl` (10 s),
`max_ops`/`max_bytes` per txn. A controller with `next_due()` is also run at the time it names
(`_schedule`).

A controller that declares `timeless = True` (its changes are a function of the snapshot alone, not
of `now`) runs on a resync only every `settled_resync_interval`: every change under its reads
already woke it, so the resync is only a safety net, and at 1,000 nodes / 10,000 instances a
resync of the timeless controllers cost ~0.7 s of CPU every 30 s on an idle cluster
(docs/benchmarks.md, "1,000 nodes on hollow agent hosts"). The others (rollout, disruption,
autoscale: decisions that move with the clock) keep `resync_interval`.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ccattler.engine.facts.snapshot import Controller
from ccattler.engine.runner.changes import DEFAULT_MAX_BYTES, DEFAULT_MAX_OPS
from ccattler.engine.runner.leader import LeaderElection
from ccattler.engine.runner.snapshot import FactCache
from ccattler.engine.runner.stats import ControllerStats
from ccattler.engine.runner.step import step
from ccattler.engine.store.base import Store, StoreError

log = logging.getLogger(__name__)

#: Conflicts in a row before the controller's cached views are re-listed from the store.
RELIST_AFTER_CONFLICTS = 3
#: Attempts per trigger; a controller still conflicting afterwards is deferred (backoff) and retried.
MAX_ATTEMPTS = 8


def backoff(attempt: int, base: float = 0.02, cap: float = 2.0) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(cap, base * 2**attempt)]."""
    return random.uniform(0, min(cap, base * 2**attempt))


class Runner:
    """Runs `controllers` (in this order) against `store` while elected leader; `stop()` ends it.

    `identity` names this runner in `leader/runner`; it must be unique among live runners. The
    default is random; pass a stable one (e.g. derived from the state directory) so a restart
    after a crash takes leadership over at once instead of after the old lease's TTL.
    """

    def __init__(
        self,
        store: Store,
        controllers: Sequence[Controller],
        *,
        identity: str | None = None,
        debounce: float = 0.03,
        resync_interval: float = 30.0,
        settled_resync_interval: float = 300.0,
        leader_ttl: float = 10.0,
        max_ops: int = DEFAULT_MAX_OPS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.controllers = tuple(controllers)
        self.identity = identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.debounce = debounce
        self.resync_interval = resync_interval
        self.settled_resync_interval = max(resync_interval, settled_resync_interval)
        self.max_ops = max_ops
        self.max_bytes = max_bytes
        self.clock = clock
        #: Per controller counters; read them, never write them.
        self.stats: dict[str, ControllerStats] = {c.name: ControllerStats() for c in self.controllers}
        self.leader = LeaderElection(store, self.identity, ttl=leader_ttl, on_change=self._leadership)
        self._wake = threading.Condition()
        self._dirty: set[str] = set()
        self._leading = False
        self._stopped = threading.Event()
        self._own_revisions: dict[str, deque[int]] = {c.name: deque(maxlen=64) for c in self.controllers}
        self._retry_at: dict[str, float] = {}  # controllers waiting out an error backoff
        self._failures: dict[str, int] = {c.name: 0 for c in self.controllers}
        # A controller's optional `wakes_on(key, *change)` narrows which changes under its reads wake it.
        self._wakes_on = {c.name: getattr(c, "wakes_on", None) for c in self.controllers}
        self._cache: FactCache | None = None
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()

    @property
    def is_leader(self) -> bool:
        return self.leader.is_leader

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="runner", daemon=True)
        self._thread.start()
        self.leader.start()

    def stop(self) -> None:
        """Stop acting, give up leadership and end every thread this runner started."""
        self._stopped.set()
        with self._wake:
            self._wake.notify_all()
        self.leader.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._cache is not None:
            self._cache.stop()
            self._cache = None

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the runner leads and has nothing pending among the events its watches have
        delivered so far (a write made just before the call may not have arrived yet)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if self._idle.wait(timeout=left):
                with self._wake:
                    if self._leading and not self._dirty and self._idle.is_set():
                        return True
                time.sleep(0.005)
        return False

    # -- triggering ---------------------------------------------------------------------------

    def _leadership(self, leading: bool) -> None:
        with self._wake:
            self._leading = leading
            if leading:
                self._dirty.update(c.name for c in self.controllers)
            self._idle.clear()
            self._wake.notify_all()

    def _changed(self, key: str, revision: int, *change: Any) -> None:
        """A watch event: mark dirty every controller reading `key` (except the one that wrote it)."""
        marked = False
        with self._wake:
            for controller in self.controllers:
                if revision in self._own_revisions[controller.name]:
                    continue
                if key.startswith(controller.reads) or any(r.startswith(key) for r in controller.reads):
                    wakes_on = self._wakes_on[controller.name]
                    if wakes_on is not None and not wakes_on(key, *change):
                        continue
                    self._dirty.add(controller.name)
                    marked = True
            if marked:
                self._idle.clear()
                self._wake.notify_all()

    # -- the loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        next_resync = time.monotonic() + self.resync_interval
        next_settled = time.monotonic() + self.settled_resync_interval
        while not self._stopped.is_set():
            with self._wake:
                leading = self._leading
                now = time.monotonic()
                for name, at in list(self._retry_at.items()):
                    if at <= now:  # its error backoff is over: run it again
                        del self._retry_at[name]
                        self._dirty.add(name)
                if not leading:
                    self._idle.clear()
                    self._wake.wait(timeout=0.5)
                elif not self._dirty and now < next_resync:
                    self._idle.set()
                    wake_at = min([next_resync, *self._retry_at.values()])
                    self._wake.wait(timeout=max(0.0, wake_at - now))
                    continue
            if not leading:
                self._drop_cache()  # a follower keeps no views: they would go stale unwatched
                continue
            if self._stopped.is_set():
                break
            if time.monotonic() >= next_resync:
                next_resync = time.monotonic() + self.resync_interval
                settled = time.monotonic() >= next_settled
                if settled:
                    next_settled = time.monotonic() + self.settled_resync_interval
                with self._wake:
                    self._dirty.update(c.name for c in self.controllers
                                       if settled or not getattr(c, "timeless", False))
            if not self._ensure_cache():
                continue
            time.sleep(self.debounce)  # let a burst of events collapse into one run
            with self._wake:
                dirty, self._dirty = self._dirty, set()
            for controller in self.controllers:
                if controller.name in dirty and self.leader.is_leader and not self._stopped.is_set():
                    self._run_controller(controller)

    def _ensure_cache(self) -> bool:
        if self._cache is not None:
            return True
        cache = FactCache(self.store, {p for c in self.controllers for p in c.reads}, self._changed)
        try:
            cache.start()
        except StoreError as exc:
            log.warning("runner %s: cannot list the store (%s); retrying", self.identity, exc)
            cache.stop()
            self._stopped.wait(1.0)
            return False
        self._cache = cache
        return True

    def _drop_cache(self) -> None:
        cache, self._cache = self._cache, None
        if cache is not None:
            cache.stop()

    def _run_controller(self, controller: Controller) -> None:
        stats = self.stats[controller.name]
        for attempt in range(MAX_ATTEMPTS):
            fence = self.leader.fence
            if fence is None or self._cache is None:
                return
            snapshot = self._cache.snapshot(controller.reads)
            try:
                outcome = step(self.store, controller, snapshot, self.clock(), stats,
                               fence=fence, max_ops=self.max_ops, max_bytes=self.max_bytes)
            except Exception:  # a controller bug or a store failure must not end the loop
                stats.errors += 1
                failures = self._failures[controller.name] = self._failures[controller.name] + 1
                log.exception("runner %s: controller %s failed (%d in a row)",
                              self.identity, controller.name, failures)
                self._defer(controller, backoff(failures, base=0.1, cap=30.0))
                return
            self._failures[controller.name] = 0
            result = outcome.result
            if result is not None and result.revision is not None:
                self._own_revisions[controller.name].extend(rev for rev, _ in result.written)
                waited = time.monotonic()
                if not self._cache.wait_for(result.written, timeout=1.0):
                    log.warning("runner %s: the watch has not delivered revision %d after 1 s",
                                self.identity, result.revision)
                stats.watch_wait_seconds_sum += time.monotonic() - waited
            if not outcome.conflict:
                self._schedule(controller)
                return
            if self._fenced_out(fence, controller.name, stats):
                return
            if attempt + 1 >= RELIST_AFTER_CONFLICTS:
                try:
                    self._cache.relist(controller.reads)
                except StoreError as exc:
                    log.warning("runner %s: re-list for %s failed: %s", self.identity, controller.name, exc)
            self._stopped.wait(backoff(attempt))
        log.warning("runner %s: controller %s still conflicting after %d attempts; will retry",
                    self.identity, controller.name, MAX_ATTEMPTS)
        self._defer(controller, backoff(MAX_ATTEMPTS, cap=2.0))

    def _fenced_out(self, fence: Any, controller: str, stats: ControllerStats) -> bool:
        """After a refused commit: True if the refusal was the leader fence (another runner leads
        now, e.g. this one was paused past its lease); then step down instead of retrying."""
        try:
            held = self.store.get(fence.key)
        except StoreError:
            return False
        if held is not None and held.mod_revision == fence.mod_revision:
            return False  # still ours: an ordinary conflict on the controller's own keys
        stats.fenced += 1
        log.warning("runner %s: commit of %s refused by the leader fence (lease taken at revision %d, "
                    "leader key now %s); this runner no longer leads", self.identity, controller,
                    fence.mod_revision, f"at revision {held.mod_revision}" if held else "absent")
        self.leader.lost()
        return True

    def _schedule(self, controller: Controller) -> None:
        """A controller whose decision changes with time alone (a stabilization window ending)
        says when by `next_due() -> unix seconds | None`: it runs again then, not at the next
        resync, even if nothing it reads changes."""
        next_due = getattr(controller, "next_due", None)
        at = next_due() if next_due is not None else None
        if at is not None and at > self.clock():  # a time already past would run it in a loop
            due = time.monotonic() + max(0.0, at - self.clock())
            with self._wake:  # an earlier error retry stays earlier
                self._retry_at[controller.name] = min(due, self._retry_at.get(controller.name, due))

    def _defer(self, controller: Controller, delay: float) -> None:
        """Run `controller` again after `delay` seconds, without holding up the others."""
        with self._wake:
            self._retry_at[controller.name] = time.monotonic() + delay
