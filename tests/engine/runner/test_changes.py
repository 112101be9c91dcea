"""Change sets become guarded transactions: pruning, write-domain drops, batching that never splits a
group, fencing, and conflicts detected by the guards (against real SQLite and etcd)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from ccattler.engine.facts.snapshot import ChangeSet, Snapshot
from ccattler.engine.runner import GroupTooLarge, plan_batches, prune, read_snapshot
from ccattler.engine.runner.changes import commit
from ccattler.engine.store import Compare


def snap(values=None, mods=None, revision=1) -> Snapshot:
    return Snapshot(revision, MappingProxyType(values or {}), MappingProxyType(mods or {}))


def test_prune_drops_writes_outside_the_domain_and_noops():
    snapshot = snap({"out/a": {"v": 1}, "out/b": {"v": 2}}, {"out/a": 3, "out/b": 4})
    changes = ChangeSet(
        puts={"out/a": {"v": 1}, "out/c": {"v": 3}, "desired/service/x/y": {"evil": True}},
        deletes=frozenset({"out/b", "out/gone", "observed/node/n1"}),
        groups=(frozenset({"out/c", "out/a"}), frozenset({"out/c", "out/b"})),
    )
    pruned = prune(changes, snapshot, ("out/",))
    assert pruned.dropped == ("desired/service/x/y", "observed/node/n1")
    assert pruned.noops == 2  # out/a unchanged, out/gone absent
    assert dict(pruned.changes.puts) == {"out/c": {"v": 3}}
    assert pruned.changes.deletes == {"out/b"}
    assert pruned.changes.groups == (frozenset({"out/c", "out/b"}),)


def test_one_batch_when_it_fits_with_guards_on_changed_keys_inputs_and_fence():
    snapshot = snap({"out/a": {"v": 0}, "in/a": {"v": 1}}, {"out/a": 5, "in/a": 7})
    changes = ChangeSet({"out/a": {"v": 1}, "out/b": {"v": 2}})
    [batch] = plan_batches(changes, snapshot, depends_on=lambda k: ["in/" + k[4:]],
                           fence=Compare("leader/runner", 9))
    assert batch.compares == {"out/a": 5, "out/b": 0, "in/a": 7, "in/b": 0, "leader/runner": 9}
    assert batch.puts == {"out/a": {"v": 1}, "out/b": {"v": 2}}


def test_batches_never_split_a_group_and_removals_go_first():
    puts = {f"out/{i:02d}": {"i": i} for i in range(10)}
    deletes = frozenset({"out/x1", "out/x2"})
    groups = (frozenset({"out/00", "out/05", "out/09"}), frozenset({"out/01", "out/x1"}))
    snapshot = snap({"out/x1": {}, "out/x2": {}}, {"out/x1": 2, "out/x2": 2})
    batches = plan_batches(ChangeSet(puts, deletes, groups), snapshot, max_ops=3)
    assert all(b.ops <= 3 and len(b.compares) <= 3 for b in batches)
    assert batches[0].deletes == ["out/x2"]  # a pure removal comes first
    for group in groups:
        holders = [b for b in batches if group & (b.puts.keys() | set(b.deletes))]
        assert len(holders) == 1, group
    written = [k for b in batches for k in [*b.puts, *b.deletes]]
    assert sorted(written) == sorted([*puts, *deletes])


def test_a_group_larger_than_a_transaction_is_a_clear_error():
    puts = {f"out/{i}": {} for i in range(5)}
    with pytest.raises(GroupTooLarge, match="atomic group of 5 changes"):
        plan_batches(ChangeSet(puts, groups=(frozenset(puts),)), snap(), max_ops=4)


def test_commit_in_batches_against_the_real_store(store):
    puts = {f"out/{i:02d}": {"i": i} for i in range(25)}
    changes = ChangeSet(puts, groups=(frozenset(list(puts)[:4]),))
    snapshot = read_snapshot(store, ["out/"])
    batches = plan_batches(changes, snapshot, max_ops=5)
    result = commit(store, batches, changes)
    assert not result.conflict and result.committed_ops == 25 and result.transactions == len(batches) >= 5
    facts, _ = store.range("out/")
    assert len(facts) == 25


def test_a_guard_on_a_changed_input_refuses_the_commit(store):
    store.put("in/a", {"v": 1})
    snapshot = read_snapshot(store, ["in/", "out/"])
    store.put("in/a", {"v": 2})  # the input moved on after the snapshot was read
    changes = ChangeSet({"out/a": {"v": 1}})
    batches = plan_batches(changes, snapshot, depends_on=lambda k: ["in/" + k[4:]])
    result = commit(store, batches, changes)
    assert result.conflict and result.committed_ops == 0
    assert store.get("out/a") is None


def test_a_stale_fence_refuses_the_commit(store):
    _, rev = store.txn([Compare("leader/runner", 0)], [("leader/runner", {"identity": "a"})])
    store.put("leader/runner", {"identity": "b"})  # someone else leads now
    changes = ChangeSet({"out/a": {"v": 1}})
    batches = plan_batches(changes, read_snapshot(store, ["out/"]), fence=Compare("leader/runner", rev))
    assert commit(store, batches, changes).conflict
    assert store.get("out/a") is None


@pytest.fixture(params=["sqlite", "etcd"])
def small_store(request, tmp_path):
    """A store whose server refuses transactions of more than 4 operations."""
    from ccattler.engine.store import open_store
    from ccattler.engine.store.etcd_process import EtcdProcess

    if request.param == "sqlite":
        with open_store(f"sqlite://{tmp_path}/small.db?max_txn_ops=4") as store:
            yield store
        return
    with EtcdProcess(max_txn_ops=4) as etcd, open_store(etcd.url) as store:
        yield store


def test_a_lower_server_limit_splits_batches_between_groups(small_store):
    puts = {f"out/{i:02d}": {"i": i} for i in range(12)}
    changes = ChangeSet(puts, groups=(frozenset({"out/00", "out/01"}),))
    batches = plan_batches(changes, read_snapshot(small_store, ["out/"]), max_ops=100)
    assert len(batches) == 1
    result = commit(small_store, batches, changes)
    assert not result.conflict and result.committed_ops == 12 and result.transactions >= 3
    assert len(small_store.range("out/")[0]) == 12
