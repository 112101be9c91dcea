"""The watch queue both backends use: order, cancel, and a resync instead of an unbounded backlog."""

from __future__ import annotations

from ccattler.engine.store import Event
from ccattler.engine.store.queue_watch import QueueWatch


def put(revision: int) -> Event:
    return Event("put", f"k/{revision}", revision, revision)


def test_events_come_out_in_the_order_they_were_pushed():
    watch = QueueWatch("k/")
    watch.push([put(1), put(2)])
    watch.push([put(3)])
    assert [watch.get(0).revision for _ in range(3)] == [1, 2, 3]
    assert watch.get(0) is None


def test_a_reader_that_falls_too_far_behind_gets_one_resync_then_new_events():
    watch = QueueWatch("k/", max_pending=3)
    watch.push([put(1), put(2), put(3)])
    watch.push([put(4)])
    resync = watch.get(0)
    assert (resync.kind, resync.key, resync.revision) == ("resync", "k/", 4)
    assert watch.get(0) is None
    watch.push([put(5)])
    assert watch.get(0).revision == 5


def test_cancel_calls_back_once_and_drops_what_is_queued():
    cancelled = []
    watch = QueueWatch("k/", on_cancel=cancelled.append)
    watch.push([put(1)])
    watch.cancel()
    watch.cancel()
    watch.push([put(2)])
    assert watch.get(0) is None and cancelled == [watch]
