"""The watch-fed fact cache: views follow the store (values and mod revisions), snapshots equal a
direct read, re-lists converge, and a stale event from a replaced watch is ignored."""

from __future__ import annotations

import time

from runner_builders import eventually

from ccattler.engine.runner import FactCache, read_snapshot
from ccattler.engine.store import Event


def test_views_follow_the_store_and_match_a_direct_read(store):
    store.put("a/1", {"v": 1})
    changed: list[str] = []
    cache = FactCache(store, ["a/", "b/", "a/deeper/"], lambda key, rev, *change: changed.append(key))
    cache.start()
    try:
        store.put("a/2", {"v": 2})
        store.put("b/1", {"v": 3})
        store.delete("a/1")
        store.put("b/1", {"v": 3})  # same value again: applied, but reported as no change
        assert eventually(lambda: cache.snapshot(["a/", "b/"]).revision == store.revision())
        direct = read_snapshot(store, ["a/", "b/"])
        cached = cache.snapshot(["a/", "b/"])
        assert dict(cached.values) == dict(direct.values)
        assert dict(cached.mod_revisions) == dict(direct.mod_revisions)
        # one watch per prefix: each prefix's changes come in order, the two prefixes interleave
        assert sorted(changed) == ["a/1", "a/2", "b/1"]
        assert [k for k in changed if k.startswith("a/")] == ["a/2", "a/1"]
        assert dict(cache.snapshot(["b/"]).values) == {"b/1": {"v": 3}}
        cache.relist(["a/"])
        assert dict(cache.snapshot(["a/"]).values) == {"a/2": {"v": 2}}
    finally:
        cache.stop()


def test_an_event_already_in_a_relisted_view_is_ignored(sqlite_store):
    store = sqlite_store
    cache = FactCache(store, ["a/"], lambda key, rev, *change: None)
    cache.start()
    try:
        first = store.put("a/1", {"v": 1})
        store.put("a/1", {"v": 2})
        assert eventually(lambda: cache.snapshot(["a/"]).values.get("a/1") == {"v": 2})
        cache.relist(["a/"])
        view = cache._views["a/"]
        view.watch.cancel()
        # A late delivery from the watch the re-list replaced: older than the list, so dropped.
        view.watch = _Replay([Event("put", "a/1", {"v": 1}, first)])
        assert eventually(lambda: not view.watch.pending)
        time.sleep(0.1)  # let the pump finish with the event it took
        assert cache.snapshot(["a/"]).values["a/1"] == {"v": 2}
    finally:
        cache.stop()


class _Replay:
    def __init__(self, events):
        self.pending = list(events)

    def get(self, timeout=None):
        if not self.pending:
            time.sleep(timeout or 0)
            return None
        return self.pending.pop(0)

    def cancel(self):
        self.pending.clear()
