"""Conformance: watches — ordering, prev values, resume, resync after compaction, cancel."""

from __future__ import annotations

import threading
import time

import pytest

from ccattler.engine.store import Event

pytestmark = pytest.mark.store

WAIT = 5.0


def take(watch, count):
    """The next `count` events, failing (not hanging) if they do not come."""
    events = []
    for _ in range(count):
        event = watch.get(timeout=WAIT)
        assert event is not None, f"expected {count} events, got {events}"
        events.append(event)
    return events


def brief(events):
    return [(event.kind, event.key, event.value, event.prev_value) for event in events]


def test_watch_delivers_puts_and_deletes_in_order_with_prev_values(store):
    with store.watch("w/") as watch:
        first = store.put("w/a", 1)
        second = store.put("w/a", 2)
        third = store.delete("w/a")
        events = take(watch, 3)
    assert brief(events) == [("put", "w/a", 1, None), ("put", "w/a", 2, 1), ("delete", "w/a", None, 2)]
    assert [event.revision for event in events] == [first, second, third]


def test_watch_sees_only_its_prefix(store):
    with store.watch("w/") as watch:
        store.put("wx", 0)
        store.put("other/a", 0)
        store.put("w/b", 1)
        assert brief(take(watch, 1)) == [("put", "w/b", 1, None)]


def test_watch_gives_every_event_of_one_txn_at_one_revision(store):
    store.put("w/gone", 0)
    with store.watch("w/") as watch:
        _, revision = store.txn((), {"w/a": 1, "w/b": 2}, ["w/gone"])
        events = take(watch, 3)
    assert {event.revision for event in events} == {revision}
    assert sorted(brief(events)) == [
        ("delete", "w/gone", None, 0),
        ("put", "w/a", 1, None),
        ("put", "w/b", 2, None),
    ]


def test_watch_from_a_range_revision_replays_exactly_what_came_after(store):
    store.put("r/a", 1)
    _, snapshot = store.range("r/")
    store.put("r/a", 2)
    store.put("r/b", 3)
    with store.watch("r/", snapshot) as watch:
        events = take(watch, 2)
        store.put("r/c", 4)
        events += take(watch, 1)
    assert brief(events) == [("put", "r/a", 2, 1), ("put", "r/b", 3, None), ("put", "r/c", 4, None)]


def test_watch_resumes_without_gaps_from_the_last_seen_revision(store):
    with store.watch("g/") as watch:
        for i in range(5):
            store.put(f"g/{i}", i)
        seen = take(watch, 3)
    for i in range(5, 8):
        store.put(f"g/{i}", i)
    with store.watch("g/", seen[-1].revision) as resumed:
        rest = take(resumed, 4)
    assert [event.value for event in seen + rest] == [0, 1, 2, 3, 4, 5, 6]


def test_watch_from_a_compacted_revision_gets_a_resync_event_then_goes_on(store):
    old = store.put("c/a", 1)
    store.put("c/a", 2)
    current = store.put("c/a", 3)
    store.compact(current)
    with store.watch("c/", old - 1) as watch:
        resync = take(watch, 1)[0]
        assert resync.kind == "resync" and resync.revision >= current
        after = store.put("c/a", 4)
        event = take(watch, 1)[0]
    assert (event.kind, event.value, event.revision) == ("put", 4, after)


def test_after_resync_a_range_at_its_revision_rebuilds_the_state(store):
    store.put("c/a", 1)
    old = store.put("c/b", 2)
    store.compact(store.put("c/a", 5))
    with store.watch("c/", old - 2) as watch:
        resync = take(watch, 1)[0]
    facts, _ = store.range("c/", resync.revision)
    assert [(fact.key, fact.value) for fact in facts] == [("c/a", 5), ("c/b", 2)]


def test_a_cancelled_watch_returns_none_and_ends_iteration(store):
    watch = store.watch("x/")
    store.put("x/a", 1)
    assert take(watch, 1)[0].value == 1
    watch.cancel()
    store.put("x/b", 2)
    assert watch.get(timeout=0.2) is None
    assert list(watch) == []


def test_cancel_wakes_a_blocked_reader(store):
    watch = store.watch("x/")
    results = []
    reader = threading.Thread(target=lambda: results.append(watch.get()))
    reader.start()
    watch.cancel()
    reader.join(timeout=WAIT)
    assert not reader.is_alive() and results == [None]


def test_two_watches_are_independent(store):
    first, second = store.watch("m/"), store.watch("m/a")
    store.put("m/a", 1)
    store.put("m/b", 2)
    assert [event.key for event in take(first, 2)] == ["m/a", "m/b"]
    assert [event.key for event in take(second, 1)] == ["m/a"]
    first.cancel()
    store.put("m/a", 3)
    assert take(second, 1)[0].value == 3
    second.cancel()


def test_iterating_a_watch_yields_events(store):
    with store.watch("i/") as watch:
        store.txn(puts={"i/a": 1, "i/b": 2})
        events = []
        for event in watch:
            events.append(event)
            if len(events) == 2:
                break
    assert all(isinstance(event, Event) for event in events)
    assert sorted(event.key for event in events) == ["i/a", "i/b"]


def test_a_watch_from_a_future_revision_skips_what_comes_before_it(store):
    now = store.revision()
    with store.watch("fut/", now + 2) as watch:
        store.put("fut/a", 1)
        store.put("fut/a", 2)
        third = store.put("fut/a", 3)
        event = take(watch, 1)[0]
        assert (event.value, event.revision) == (3, third)
        assert watch.get(timeout=0.2) is None


def test_range_at_revision_zero_means_now(store):
    store.put("z/a", 1)
    assert store.range("z/", 0) == store.range("z/")


def test_a_watch_resumed_far_back_replays_history_at_the_readers_pace(store):
    start = store.revision()
    doc = "x" * 100_000
    revisions = [store.put(f"big/{i}", doc) for i in range(50)]  # 5 MB of history
    store.put("other/x", 1)
    watch = store.watch("big/", start, max_bytes=1_000_000)
    got, peak = [], 0
    try:
        while len(got) < len(revisions):
            event = watch.get(timeout=5)
            assert event is not None and event.kind == "put", event
            got.append(event.revision)
            peak = max(peak, watch.queued_bytes)
            if len(got) == 10:
                revisions.append(store.put("big/live", doc))  # a live commit waits its turn
        assert got == revisions and peak <= 1_000_000
    finally:
        watch.cancel()


def test_a_reader_that_stops_past_the_byte_bound_is_told_it_fell_behind(store):
    from ccattler.engine.store.queue_watch import behind

    watch = store.watch("big/", max_bytes=300_000)
    try:
        first = store.put("big/0", "x" * 100_000)
        assert watch.get(timeout=5).revision == first
        for i in range(1, 10):
            store.put(f"big/{i}", "x" * 100_000)
        time.sleep(1)  # etcd delivers to the watch's own thread: let it queue everything
        deadline = time.monotonic() + 5
        while (event := watch.get(timeout=1)) is not None and event.kind != "resync":
            assert time.monotonic() < deadline
        detail = behind(event)
        assert detail is not None and detail["last_revision"] >= first
    finally:
        watch.cancel()


def test_a_reader_that_stalls_during_a_replay_is_told_it_fell_behind(store, monkeypatch):
    """A resumed watch replays history at the reader's pace; a reader that then takes nothing for
    REPLAY_STALL_SECONDS is cut off like a live one past the byte bound (issue 12 class 6: on etcd
    it was paused, holding the replay open, for as long as the reader stayed away)."""
    from ccattler.engine.store import queue_watch
    from ccattler.engine.store.queue_watch import behind

    monkeypatch.setattr(queue_watch, "REPLAY_STALL_SECONDS", 0.4)
    start = store.revision()
    first = store.put("big/0", "x" * 100_000)
    for i in range(1, 30):  # 3 MB of history against a 300 kB bound
        store.put(f"big/{i}", "x" * 100_000)
    watch = store.watch("big/", start, max_bytes=300_000)
    try:
        assert watch.get(timeout=5).revision == first
        time.sleep(1.5)  # the reader stays away
        deadline = time.monotonic() + 5
        while (event := watch.get(timeout=1)) is not None and event.kind != "resync":
            assert time.monotonic() < deadline
        detail = behind(event)
        assert detail is not None and detail["last_revision"] >= first, event
    finally:
        watch.cancel()
