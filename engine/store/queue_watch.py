"""A `Watch` fed by a producer thread: events are pushed at commit time and woken without polling.

Knobs: `max_pending` events and `max_bytes` queued bytes — a consumer that falls further behind
gets its backlog replaced by one resync event whose value says it fell behind (`BEHIND`, with the
last revision it was given), so a stalled reader cannot eat the server's memory. A batch pushed
into an empty queue is always taken whole, so one commit larger than `max_bytes` does not cut off
a reader that is keeping up: the bound is `max_bytes` plus one commit. `refill` lets a backend
hand out history at the reader's pace (called whenever the queue is empty, until it says no more).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from ccattler.engine.store.base import Event, Watch

MAX_PENDING = 100_000
#: Queued bytes for the server's own watches (slice hub, controllers); API clients get less
#: (`ServerOptions.watch_max_bytes`).
MAX_BYTES = 64 * 1024 * 1024
#: What an event costs besides its documents (the objects holding it).
EVENT_OVERHEAD = 64
#: A reader that takes nothing for this long while history is replayed at its pace is told it
#: fell behind (as a live reader past the byte bound is), instead of holding the replay open.
REPLAY_STALL_SECONDS = 30.0
#: The resync value that means "this reader fell behind", not "history was compacted".
BEHIND = "fell behind"


def behind(event: Event) -> dict | None:
    """The details of a fell-behind resync (`last_revision`, `queued_bytes`, `max_bytes`), else None."""
    value = event.value
    if event.kind == "resync" and isinstance(value, dict) and value.get("reason") == BEHIND:
        return value
    return None


class QueueWatch(Watch):
    """A per-watch queue; the backend pushes, the consumer `get`s, `cancel` unhooks it."""

    def __init__(
        self,
        prefix: str,
        on_cancel: Callable[[QueueWatch], None] | None = None,
        max_pending: int = MAX_PENDING,
        max_bytes: int | None = None,
        after: int = 0,
        refill: Callable[[QueueWatch], bool] | None = None,
        replay_stall: float | None = None,
    ) -> None:
        self.prefix = prefix
        self.replay_stall = REPLAY_STALL_SECONDS if replay_stall is None else replay_stall
        self._last_take = time.monotonic()  # when the reader last took an event
        self.max_pending = max_pending
        self.max_bytes = MAX_BYTES if max_bytes is None else max_bytes
        self._events: deque[tuple[Event, int]] = deque()
        self.queued_bytes = 0
        self._delivered = after  # the newest revision handed out (at first: where the watch starts)
        self._cond = threading.Condition(threading.Lock())
        self._cancelled = False
        self._on_cancel = on_cancel
        self._refill = refill  # asked for more (history) when the queue runs dry; False: no more
        self._waiting = 0  # producers in `wait_room`

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def push(self, events: Iterable[Event], size: int | None = None) -> None:
        """Queue `events`; `size` is what they weigh in bytes (default: `EVENT_OVERHEAD` each)."""
        batch = list(events)
        if not batch:
            return
        each = EVENT_OVERHEAD if size is None else max(EVENT_OVERHEAD, size // len(batch))
        with self._cond:
            if self._cancelled:
                return
            total = each * len(batch)
            if self._events and (len(self._events) + len(batch) > self.max_pending
                                 or self.queued_bytes + total > self.max_bytes):
                self._fall_behind(max(event.revision for event in batch), total)
            else:
                self._events.extend((event, each) for event in batch)
                self.queued_bytes += total
            self._cond.notify_all()

    def _fall_behind(self, newest: int, incoming: int = 0) -> None:
        """Replace the queue with one resync saying the reader fell behind (under the lock):
        everything queued is at or before `newest`."""
        revisions = [event.revision for event, _ in self._events]
        newest = max(newest, *revisions) if revisions else newest
        # A revision only partly handed out is not complete: resuming repeats it, never skips.
        complete = min(self._delivered, min(revisions) - 1) if revisions else self._delivered
        detail = {"reason": BEHIND, "last_revision": complete,
                  "queued_bytes": self.queued_bytes + incoming, "max_bytes": self.max_bytes}
        self._events.clear()
        self._events.append((Event("resync", self.prefix, detail, newest), EVENT_OVERHEAD))
        self.queued_bytes = EVENT_OVERHEAD
        self._cond.notify_all()

    def get(self, timeout: float | None = None) -> Event | None:
        if self._refill is not None and time.monotonic() - self._last_take > self.replay_stall:
            with self._cond:  # history left to hand out, and the reader stayed away: cut it off
                if not self._cancelled and not self._events:
                    self._refill = None
                    self._fall_behind(self._delivered)
        while self._refill is not None and not self._events and not self._cancelled:
            if not self._refill(self):  # outside our lock: the producer takes its own, then ours
                self._refill = None
        with self._cond:
            if not self._events and not self._cancelled:
                self._cond.wait_for(lambda: self._events or self._cancelled, timeout)
            if self._cancelled or not self._events:
                return None
            event, size = self._events.popleft()
            self.queued_bytes -= size
            self._last_take = time.monotonic()
            if self._waiting:
                self._cond.notify_all()
            self._delivered = max(self._delivered, event.revision)
            return event

    def wait_room(self, limit: int) -> bool:
        """Block the producer until at most `limit` bytes are queued (or the watch is cancelled):
        how a backend replays history at the reader's pace. False when the reader took nothing
        for `replay_stall` seconds: it is then told it fell behind, and the replay should stop."""
        with self._cond:
            self._waiting += 1
            try:
                while not self._cond.wait_for(lambda: self.queued_bytes <= limit or self._cancelled,
                                              timeout=self.replay_stall / 4):
                    if time.monotonic() - self._last_take > self.replay_stall:
                        self._fall_behind(self._delivered)
                        return False
                return True
            finally:
                self._waiting -= 1

    def cancel(self) -> None:
        with self._cond:
            if self._cancelled:
                return
            self._cancelled = True
            self._events.clear()
            self.queued_bytes = 0
            self._cond.notify_all()
        if self._on_cancel is not None:
            self._on_cancel(self)
