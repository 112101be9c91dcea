"""The watch queue both backends use: order, cancel, and a resync instead of an unbounded backlog."""

from __future__ import annotations

from ccattler.engine.store import Event
from ccattler.engine.store.queue_watch import QueueWatch, behind


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


def test_a_reader_past_the_byte_bound_is_told_it_fell_behind_at_its_last_complete_revision():
    watch = QueueWatch("k/", max_bytes=1000, after=7)
    watch.push([put(8)], size=400)
    assert watch.get(0).revision == 8
    watch.push([put(9), Event("put", "k/9b", 9, 9)], size=600)
    assert watch.get(0).revision == 9  # half of revision 9 handed out
    watch.push([put(10)], size=500)
    assert watch.queued_bytes <= 1000
    watch.push([put(11)], size=600)  # 300 + 500 + 600 > 1000
    resync = watch.get(0)
    assert resync.kind == "resync" and resync.revision == 11
    # Revision 9 was not handed out whole: resuming from 8 repeats it rather than skipping its rest.
    assert behind(resync) == {"reason": "fell behind", "last_revision": 8, "queued_bytes": 1400,
                              "max_bytes": 1000}
    assert watch.get(0) is None and watch.queued_bytes == 0


def test_one_commit_larger_than_the_bound_reaches_a_reader_that_keeps_up():
    watch = QueueWatch("k/", max_bytes=1000)
    watch.push([put(1), put(2)], size=5000)
    assert [watch.get(0).revision for _ in range(2)] == [1, 2]
    assert watch.queued_bytes == 0


def test_a_compaction_resync_is_not_a_fell_behind_one():
    assert behind(Event("resync", "k/", None, 3)) is None
    assert behind(put(3)) is None
