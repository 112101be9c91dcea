"""A `Watch` fed by a producer thread: events are pushed at commit time and woken without polling."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable

from ccattler.engine.store.base import Event, Watch


class QueueWatch(Watch):
    """An unbounded per-watch queue; the backend pushes, the consumer `get`s, `cancel` unhooks it."""

    def __init__(self, prefix: str, on_cancel: Callable[[QueueWatch], None] | None = None) -> None:
        self.prefix = prefix
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
