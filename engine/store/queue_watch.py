"""A `Watch` fed by a producer thread: events are pushed at commit time and woken without polling.

Knob: `max_pending` — a consumer that falls this many events behind gets its backlog replaced by
one resync event (re-read with `range`), so a stalled reader cannot eat the server's memory.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable

from ccattler.engine.store.base import Event, Watch

MAX_PENDING = 100_000


class QueueWatch(Watch):
    """A per-watch queue; the backend pushes, the consumer `get`s, `cancel` unhooks it."""

    def __init__(
        self,
        prefix: str,
        on_cancel: Callable[[QueueWatch], None] | None = None,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.prefix = prefix
        self.max_pending = max_pending
        self._events: deque[Event] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._cancelled = False
        self._on_cancel = on_cancel

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def push(self, events: Iterable[Event]) -> None:
        with self._cond:
            if self._cancelled:
                return
            self._events.extend(events)
            if len(self._events) > self.max_pending:
                # Everything queued is at or before the newest revision: one resync replaces it.
                newest = max(event.revision for event in self._events)
                self._events.clear()
                self._events.append(Event("resync", self.prefix, None, newest))
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> Event | None:
        with self._cond:
            if not self._events and not self._cancelled:
                self._cond.wait_for(lambda: self._events or self._cancelled, timeout)
            if self._cancelled or not self._events:
                return None
            return self._events.popleft()

    def cancel(self) -> None:
        with self._cond:
            if self._cancelled:
                return
            self._cancelled = True
            self._events.clear()
            self._cond.notify_all()
        if self._on_cancel is not None:
            self._on_cancel(self)
