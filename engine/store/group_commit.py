"""Group commit: concurrent writers share one durable commit instead of queueing for one fsync each.

Each caller queues its request; whoever finds no batch running runs every queued request as one
batch (one SQLite transaction, one fsync), and the others wait for their own outcome. A lone
writer pays one lock round trip more than committing directly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Request = TypeVar("Request")
Result = TypeVar("Result")


class _Slot(Generic[Request, Result]):
    __slots__ = ("request", "outcome", "done")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.outcome: Result | BaseException | None = None
        self.done = False


class GroupCommit(Generic[Request, Result]):
    """Runs `run_batch(requests) -> outcomes` (a result or an exception per request) for callers."""

    def __init__(self, run_batch: Callable[[list[Request]], list[Result | BaseException]]) -> None:
        self._run_batch = run_batch
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Slot] = []
        self._running = False

    def submit(self, request: Request) -> Result:
        slot: _Slot = _Slot(request)
        with self._cond:
            self._queue.append(slot)
            while self._running and not slot.done:
                self._cond.wait()
            batch = None
            if not slot.done:
                self._running = True
                batch, self._queue = self._queue, []
        if batch is not None:
            self._run(batch)
        if isinstance(slot.outcome, BaseException):
            raise slot.outcome
        return slot.outcome

    def _run(self, batch: list[_Slot]) -> None:
        try:
            outcomes = self._run_batch([slot.request for slot in batch])
            if len(outcomes) != len(batch):
                raise AssertionError(f"{len(outcomes)} outcomes for {len(batch)} requests")
        except BaseException as exc:  # every waiter must learn the outcome, whatever happened
            outcomes = [exc] * len(batch)
        with self._cond:
            for slot, outcome in zip(batch, outcomes, strict=True):
                slot.outcome, slot.done = outcome, True
            self._running = False
            self._cond.notify_all()
