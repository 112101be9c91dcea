"""Snapshots hand out read-only documents, decoded once per revision and shared: a controller that
mutates one fails (TypeError) instead of changing what the other controllers see."""

from __future__ import annotations

from typing import ClassVar

import pytest
from runner_builders import Copy, eventually

from ccattler.engine.facts.frozen import ReadOnlyDocument, thaw
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot
from ccattler.engine.runner import FactCache, read_snapshot, settle


class Mutator:
    """A buggy controller: bumps `in/<k>`'s nested count in place and writes nothing."""

    name: ClassVar[str] = "mutator"
    reads: ClassVar[tuple[str, ...]] = ("in/",)
    writes: ClassVar[tuple[str, ...]] = ("out/",)
    runs = 0

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        self.runs += 1
        for _, doc in snapshot.under("in/"):
            doc["spec"]["count"] += 1
        return ChangeSet()


def test_settle_fails_on_a_controller_that_mutates_a_document(sqlite_store):
    sqlite_store.put("in/a", {"spec": {"count": 1}})
    with pytest.raises(ReadOnlyDocument, match="'count'"):
        settle(sqlite_store, [Mutator()], now=0.0)
    assert read_snapshot(sqlite_store, ["in/"]).values["in/a"] == {"spec": {"count": 1}}


def test_an_explicit_copy_may_be_changed(sqlite_store):
    sqlite_store.put("in/a", {"spec": {"count": 1}})
    doc = thaw(read_snapshot(sqlite_store, ["in/"]).values["in/a"])
    doc["spec"]["count"] += 1
    assert doc == {"spec": {"count": 2}}


def test_the_cache_shares_one_frozen_object_per_revision(store):
    store.put("in/a", {"spec": {"count": 1}, "ports": [80]})
    cache = FactCache(store, ["in/"], lambda key, rev, *change: None)
    cache.start()
    try:
        first, second = cache.snapshot(["in/"]), cache.snapshot(["in/"])
        assert first.values["in/a"] is second.values["in/a"]  # decoded once, shared
        with pytest.raises(TypeError, match="'count'"):
            first.values["in/a"]["spec"]["count"] = 2
        with pytest.raises(TypeError):
            first.values["in/a"]["ports"].append(443)
        store.put("in/a", {"spec": {"count": 2}, "ports": [80]})  # from the watch: frozen too
        assert eventually(lambda: cache.snapshot(["in/"]).values["in/a"]["spec"]["count"] == 2)
        with pytest.raises(TypeError, match="'spec'"):
            cache.snapshot(["in/"]).values["in/a"]["spec"] = {}
        assert second.values["in/a"] == {"spec": {"count": 1}, "ports": [80]}
    finally:
        cache.stop()


def test_the_live_runner_counts_the_mutator_failing_and_the_others_see_the_stored_value(store, runners):
    store.put("in/a", {"spec": {"count": 1}})
    mutator = Mutator()
    runner = runners(store, [mutator, Copy()])
    assert eventually(lambda: store.get("out/a") is not None)
    assert eventually(lambda: runner.stats["mutator"].errors >= 1)
    assert store.get("out/a").value == {"spec": {"count": 1}}
    assert runner.stats["copy"].errors == 0


def test_read_snapshot_reuses_what_it_froze_at_the_same_revision(sqlite_store):
    sqlite_store.put("in/a", {"v": 1})
    sqlite_store.put("in/b", {"v": 2})
    frozen: dict = {}
    first = read_snapshot(sqlite_store, ["in/"], frozen)
    sqlite_store.put("in/b", {"v": 3})
    second = read_snapshot(sqlite_store, ["in/"], frozen)
    assert second.values["in/a"] is first.values["in/a"]  # unchanged key: the same object
    assert second.values["in/b"] == {"v": 3} and first.values["in/b"] == {"v": 2}
    assert read_snapshot(sqlite_store, ["in/"]).values["in/a"] is not first.values["in/a"]  # no memo


class Seen:
    """Records the object identity of `in/a` in each snapshot it gets."""

    name: ClassVar[str] = "seen"
    reads: ClassVar[tuple[str, ...]] = ("in/",)
    writes: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.objects: list[object] = []

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        self.objects.append(snapshot.values["in/a"])
        return ChangeSet()


def test_settle_hands_every_controller_one_object_per_revision(sqlite_store):
    sqlite_store.put("in/a", {"v": 1})
    seen = Seen()
    settle(sqlite_store, [seen, Copy(), seen], now=0.0)
    assert len(seen.objects) >= 4 and all(o is seen.objects[0] for o in seen.objects)
