"""Conformance: reads, writes, transactions and input checks — the same on SQLite and etcd."""

from __future__ import annotations

import threading

import pytest

from ccattler.engine.facts import MAX_VALUE_BYTES, InvalidKey, InvalidValue
from ccattler.engine.store import Compacted, Compare, StoreError, TxnTooLarge

pytestmark = pytest.mark.store


def test_put_then_get_returns_the_fact(store):
    revision = store.put("desired/service/default/web", {"image": "busybox", "replicas": 3})
    fact = store.get("desired/service/default/web")
    assert fact.value == {"image": "busybox", "replicas": 3}
    assert (fact.create_revision, fact.mod_revision) == (revision, revision)
    assert (fact.version, fact.lease) == (1, None)


def test_get_of_an_absent_key_is_none(store):
    assert store.get("desired/service/default/nope") is None


def test_get_many_returns_the_facts_of_the_keys_that_exist(store):
    store.put("k/a", 1)
    store.put("k/b", 2)
    found = store.get_many(["k/a", "k/b", "k/none"])
    assert {key: fact.value for key, fact in found.items()} == {"k/a": 1, "k/b": 2}
    assert found["k/b"] == store.get("k/b")
    assert store.get_many([]) == {}


def test_put_again_bumps_version_and_keeps_create_revision(store):
    first = store.put("k/a", 1)
    second = store.put("k/a", 2)
    fact = store.get("k/a")
    assert second > first
    assert (fact.value, fact.create_revision, fact.mod_revision, fact.version) == (2, first, second, 2)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"nested": {"list": [1, 2.5, None, True]}}, id="object"),
        pytest.param([1, "two", False], id="list"),
        pytest.param("plain text ünïcödé", id="string"),
        pytest.param(42, id="integer"),
        pytest.param(False, id="bool"),
    ],
)
def test_json_values_round_trip(store, value):
    store.put("k/value", value)
    assert store.get("k/value").value == value


def test_delete_removes_the_key_in_a_new_revision(store):
    put = store.put("k/a", 1)
    deleted = store.delete("k/a")
    assert deleted > put
    assert store.get("k/a") is None
    assert store.revision() == deleted


def test_delete_of_an_absent_key_changes_nothing(store):
    before = store.put("k/a", 1)
    assert store.delete("k/missing") == before
    assert store.revision() == before


def test_range_is_sorted_and_bounded_by_the_prefix(store):
    store.txn(puts=[("a/c", 3), ("a/a", 1), ("ab", 9), ("a/b", 2), ("b/a", 4)])
    facts, revision = store.range("a/")
    assert [fact.key for fact in facts] == ["a/a", "a/b", "a/c"]
    assert revision == store.revision()


def test_range_with_an_empty_prefix_sees_every_key(store):
    store.txn(puts={"x/1": 1, "y/2": 2})
    facts, _ = store.range("")
    assert [fact.key for fact in facts] == ["x/1", "y/2"]


def test_cas_succeeds_when_the_mod_revision_matches(store):
    revision = store.put("k/a", 1)
    succeeded, new_revision = store.txn([Compare("k/a", revision)], {"k/a": 2})
    assert succeeded and new_revision > revision
    assert store.get("k/a").value == 2


def test_cas_fails_on_a_stale_revision_and_writes_nothing(store):
    stale = store.put("k/a", 1)
    current = store.put("k/a", 2)
    succeeded, revision = store.txn([Compare("k/a", stale)], {"k/b": 3}, ["k/a"])
    assert not succeeded and revision == current
    assert store.get("k/a").value == 2 and store.get("k/b") is None


def test_compare_zero_means_absent_so_create_happens_once(store):
    assert store.txn([Compare("lock/x", 0)], {"lock/x": "me"})[0]
    assert not store.txn([Compare("lock/x", 0)], {"lock/x": "you"})[0]
    assert store.get("lock/x").value == "me"


def test_compare_zero_holds_again_after_delete(store):
    store.put("k/a", 1)
    store.delete("k/a")
    assert store.txn([Compare("k/a", 0)], {"k/a": 2})[0]


def test_one_txn_is_one_revision(store):
    store.txn(puts={"t/old": 0})
    succeeded, revision = store.txn((), {"t/a": 1, "t/b": 2, "t/c": 3}, ["t/old"])
    assert succeeded
    facts, now = store.range("t/")
    assert now == revision
    assert {fact.mod_revision for fact in facts} == {revision}
    assert store.get("t/old") is None


def test_txn_accepts_pairs_as_well_as_a_mapping(store):
    store.txn(puts=[("p/a", 1), ("p/b", 2)])
    assert [fact.value for fact in store.range("p/")[0]] == [1, 2]


def test_range_at_a_revision_is_a_snapshot(store):
    store.txn(puts={"s/a": 1, "s/b": 1})
    snapshot = store.revision()
    store.put("s/a", 2)
    store.delete("s/b")
    store.put("s/c", 3)
    facts, revision = store.range("s/", snapshot)
    assert revision == snapshot
    assert [(fact.key, fact.value) for fact in facts] == [("s/a", 1), ("s/b", 1)]
    assert [(fact.key, fact.value) for fact in store.range("s/")[0]] == [("s/a", 2), ("s/c", 3)]


def test_range_at_a_compacted_revision_raises_compacted(store):
    old = store.put("c/a", 1)
    store.put("c/a", 2)
    store.put("c/a", 3)
    store.compact(store.revision())
    with pytest.raises(Compacted):
        store.range("c/", old)


def test_range_at_a_future_revision_is_an_error(store):
    with pytest.raises(StoreError, match="future"):
        store.range("f/", store.revision() + 1000)


def test_compacting_twice_at_the_same_revision_is_harmless(store):
    revision = store.put("c/a", 1)
    store.compact(revision)
    store.compact(revision)
    assert store.get("c/a").value == 1


def test_concurrent_cas_increments_never_lose_an_update(store):
    store.put("counter", 0)
    threads, increments = 4, 15

    def increment():
        for _ in range(increments):
            while True:
                fact = store.get("counter")
                if store.txn([Compare("counter", fact.mod_revision)], {"counter": fact.value + 1})[0]:
                    break

    workers = [threading.Thread(target=increment) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert store.get("counter").value == threads * increments
    assert store.get("counter").version == threads * increments + 1


@pytest.mark.parametrize(
    ("key", "message"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("a/\x00b", "NUL", id="nul"),
        pytest.param("/a", "segments", id="leading-slash"),
        pytest.param("a//b", "segments", id="double-slash"),
        pytest.param("a" * 1025, "1024 bytes", id="too-long"),
        pytest.param(7, "string", id="not-a-string"),
    ],
)
def test_bad_keys_are_rejected_with_a_clear_message(store, key, message):
    with pytest.raises(InvalidKey, match=message):
        store.put(key, 1)
    with pytest.raises(InvalidKey, match=message):
        store.txn([], {"ok": 1}, [key])
    assert store.get("ok") is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(None, "got None", id="none"),
        pytest.param({1, 2}, "not a JSON document", id="set"),
        pytest.param(float("nan"), "not a JSON document", id="nan"),
        pytest.param(b"bytes", "not a JSON document", id="bytes"),
        pytest.param("x" * MAX_VALUE_BYTES, f"limit is {MAX_VALUE_BYTES} bytes", id="oversized"),
    ],
)
def test_bad_values_are_rejected_and_nothing_is_written(store, value, message):
    with pytest.raises(InvalidValue, match=message):
        store.txn([], [("v/ok", 1), ("v/bad", value)])
    assert store.range("v/")[0] == []


def test_a_key_written_twice_in_one_txn_is_rejected(store):
    with pytest.raises(StoreError, match="written twice"):
        store.txn([], {"d/a": 1}, ["d/a"])
    assert store.get("d/a") is None


def test_a_txn_over_the_operation_limit_fails_whole_naming_the_limit(store):
    with pytest.raises(TxnTooLarge, match="max.txn.ops"):
        store.txn([], [(f"big/{i:05}", i) for i in range(10_001)])
    assert store.range("big/")[0] == []


def test_a_txn_over_the_byte_limit_fails_whole_naming_the_limit(store):
    chunk = "x" * (MAX_VALUE_BYTES - 64)
    with pytest.raises(TxnTooLarge, match="max.(txn|request).bytes"):
        store.txn([], [(f"huge/{i}", chunk) for i in range(11)])
    assert store.range("huge/")[0] == []


def test_a_txn_at_ten_thousand_operations_is_one_revision(store):
    succeeded, revision = store.txn([], [(f"many/{i:05}", i) for i in range(10_000)])
    facts, _ = store.range("many/")
    assert succeeded and len(facts) == 10_000
    assert {fact.mod_revision for fact in facts} == {revision}


@pytest.mark.parametrize(
    "bad", [pytest.param(-1, id="negative"), pytest.param("3", id="string"), pytest.param(None, id="none")]
)
def test_a_compare_needs_a_revision_that_is_an_integer(store, bad):
    with pytest.raises(StoreError, match="mod_revision must be an integer"):
        store.txn([Compare("k/a", bad)], {"k/a": 1})
    assert store.get("k/a") is None
