"""The live runner against real SQLite and etcd: watch-triggered runs, retries on conflict, write
domains, debouncing, leader election with failover, and a clean stop."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import ClassVar

from runner_builders import TTL, Copy, eventually

from ccattler.engine.facts.keys import LEADER_RUNNER
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot
from ccattler.engine.runner import Runner


def test_watch_events_drive_the_controller_and_stats_count(store, runners):
    copy = Copy()
    runner = runners(store, [copy])
    assert runner.wait_idle(10)
    store.put("in/a", {"v": 1})
    assert eventually(lambda: store.get("out/a") is not None)
    store.delete("in/a")
    assert eventually(lambda: store.get("out/a") is None)
    stats = runner.stats["copy"]
    assert stats.commits >= 2 and stats.committed_ops >= 2 and stats.reconciles >= 2
    assert stats.reconcile_seconds_sum > 0 and stats.errors == 0


def test_writes_outside_the_domain_are_dropped_and_counted(store, runners):
    store.put("in/a", {"v": 1})
    runner = runners(store, [Copy(stray="desired/service/default/evil")])
    assert eventually(lambda: store.get("out/a") is not None)
    assert runner.stats["copy"].dropped_writes >= 1
    assert store.get("desired/service/default/evil") is None


def test_a_burst_of_events_is_debounced(store, runners):
    copy = Copy()
    runner = runners(store, [copy])
    assert runner.wait_idle(10)
    before = len(copy.calls)
    for i in range(50):
        store.put(f"in/{i:02d}", {"v": i})
    assert eventually(lambda: len(store.range("out/")[0]) == 50)
    assert len(copy.calls) - before < 25


@dataclass
class Meddler:
    """Like Copy, but the first reconciles change its input behind its back: the commit must conflict."""

    name: ClassVar[str] = "meddler"
    reads: ClassVar[tuple[str, ...]] = ("in/", "out/")
    writes: ClassVar[tuple[str, ...]] = ("out/",)
    store: object = None
    meddle: int = 2
    calls: list[int] = field(default_factory=list)

    def depends_on(self, key: str) -> tuple[str, ...]:
        return ("in/" + key[4:],)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        self.calls.append(snapshot.revision)
        if len(self.calls) <= self.meddle:
            self.store.put("in/a", {"v": len(self.calls) * 100})
        return ChangeSet({f"out/{k[3:]}": v for k, v in snapshot.under("in/")})


def test_a_conflict_is_retried_until_the_commit_holds(store, runners):
    store.put("in/a", {"v": 1})
    meddler = Meddler(store=store)
    runner = runners(store, [meddler])
    assert eventually(lambda: (store.get("out/a") or None) and store.get("out/a").value == {"v": 200})
    assert runner.stats["meddler"].conflicts >= 2
    assert runner.wait_idle(10)
    assert store.get("out/a").value == store.get("in/a").value


def test_only_the_leader_acts_and_the_other_takes_over_when_its_lease_dies(store, runners):
    first, second = Copy(), Copy()
    a = runners(store, [first], identity="a")
    assert eventually(lambda: a.is_leader)
    b = runners(store, [second], identity="b")
    store.put("in/x", {"v": 1})
    assert eventually(lambda: store.get("out/x") is not None)
    time.sleep(TTL)  # b campaigns a few times meanwhile
    assert a.is_leader and not b.is_leader
    assert second.calls == [] and store.get(LEADER_RUNNER).value == {"identity": "a"}

    store.lease_revoke(a.leader.lease)  # the leader's lease dies (as if its process hung)
    assert eventually(lambda: b.is_leader, timeout=3 * TTL)
    assert eventually(lambda: not a.is_leader, timeout=3 * TTL)
    assert store.get(LEADER_RUNNER).value == {"identity": "b"}
    store.put("in/y", {"v": 2})
    assert eventually(lambda: store.get("out/y") is not None)
    assert second.calls
    calls_of_a = len(first.calls)
    store.put("in/z", {"v": 3})
    assert eventually(lambda: store.get("out/z") is not None)
    assert len(first.calls) == calls_of_a  # the deposed leader no longer reconciles


def test_stop_gives_up_leadership_at_once_and_ends_its_threads(store, runners):
    before = set(threading.enumerate())
    runner = Runner(store, [Copy()], leader_ttl=TTL, identity="solo")
    runner.start()
    assert eventually(lambda: runner.is_leader)
    runner.stop()
    assert store.get(LEADER_RUNNER) is None
    assert eventually(lambda: not (set(threading.enumerate()) - before), timeout=5)


def test_periodic_resync_reruns_controllers(store, runners):
    copy = Copy()
    runner = runners(store, [copy], resync_interval=0.3)
    assert runner.wait_idle(10)
    before = len(copy.calls)
    time.sleep(1.0)
    assert len(copy.calls) >= before + 2


@dataclass
class TimelessCopy(Copy):
    """A Copy whose changes follow the snapshot alone."""

    name: ClassVar[str] = "timeless"
    timeless: ClassVar[bool] = True


def test_a_resync_reruns_a_timeless_controller_only_at_the_settled_interval(store, runners):
    """Every change under a timeless controller's reads wakes it, so the 30 s resync (a safety net)
    runs it only every `settled_resync_interval`; a controller whose decisions move with the clock
    is rerun at every resync."""
    clocked, timeless = Copy(), TimelessCopy()
    runner = runners(store, [clocked, timeless], resync_interval=0.2, settled_resync_interval=4.0)
    assert runner.wait_idle(10)
    clocked_before, timeless_before = len(clocked.calls), len(timeless.calls)
    time.sleep(1.0)
    assert len(clocked.calls) >= clocked_before + 3
    assert len(timeless.calls) == timeless_before
    assert eventually(lambda: len(timeless.calls) > timeless_before, timeout=6)  # the settled resync
    store.put("in/t", {"v": 1})  # a change still wakes it at once
    assert eventually(lambda: store.get("out/t") is not None, timeout=1)


def test_a_tiny_max_ops_forces_batches_that_keep_each_group_in_one_revision(store, runners):
    start = store.revision()
    watch = store.watch("out/", start)
    runner = runners(store, [Copy(group_size=3)], max_ops=4)  # room for one group (+ the fence) per txn
    assert runner.wait_idle(10)
    store.txn((), [(f"in/{i}", {"v": i}) for i in range(9)], ())
    revisions: dict[str, int] = {}
    assert eventually(lambda: len(store.range("out/")[0]) == 9)
    while (event := watch.get(timeout=1.0)) is not None:
        revisions[event.key] = event.revision
    watch.cancel()
    keys = sorted(revisions)
    groups = [keys[i:i + 3] for i in range(0, 9, 3)]
    assert [len({revisions[k] for k in group}) for group in groups] == [1, 1, 1]
    assert len({revisions[group[0]] for group in groups}) == 3
    assert runner.stats["copy"].commits >= 3


@dataclass
class Fanout:
    """Writes each `in/<k>` to both `a/<k>` and `b/<k>`: two cached views, several batches."""

    name: ClassVar[str] = "fanout"
    reads: ClassVar[tuple[str, ...]] = ("in/", "a/", "b/")
    writes: ClassVar[tuple[str, ...]] = ("a/", "b/")

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        return ChangeSet({f"{side}/{k[3:]}": v for k, v in snapshot.under("in/") for side in "ab"})


def test_read_your_writes_waits_per_view_without_stalling(store, runners, caplog):
    runner = runners(store, [Fanout()], max_ops=2)  # one write + the fence per txn
    assert runner.wait_idle(10)
    store.txn((), [(f"in/{i}", {"v": i}) for i in range(3)], ())
    assert eventually(lambda: len(store.range("b/")[0]) == 3)
    assert runner.wait_idle(10)
    assert "has not delivered" not in caplog.text
    assert runner.stats["fanout"].commits == 6 and runner.stats["fanout"].conflicts == 0


def test_rewriting_the_same_value_triggers_nothing(store, runners):
    copy = Copy()
    store.put("in/a", {"v": 1})
    runner = runners(store, [copy])
    assert eventually(lambda: store.get("out/a") is not None)
    assert runner.wait_idle(10)
    before = len(copy.calls)
    for _ in range(5):
        store.put("in/a", {"v": 1})  # e.g. an agent re-registering unchanged facts
    time.sleep(0.3)
    assert runner.wait_idle(10)
    assert len(copy.calls) == before
    store.put("in/a", {"v": 2})
    assert eventually(lambda: store.get("out/a").value == {"v": 2})


@dataclass
class Picky(Copy):
    """A Copy that says changes under `in/quiet/` cannot change its result (`wakes_on`)."""

    def wakes_on(self, key: str, *change) -> bool:
        return not key.startswith("in/quiet/")


def test_wakes_on_false_keeps_a_change_from_running_the_controller(store, runners):
    picky = Picky()
    runner = runners(store, [picky])
    assert runner.wait_idle(10)
    before = len(picky.calls)
    store.put("in/quiet/a", {"v": 1})
    time.sleep(0.3)
    assert runner.wait_idle(10)
    assert len(picky.calls) == before and store.get("out/quiet/a") is None
    store.put("in/loud", {"v": 1})  # a change it wakes on: the run sees everything
    assert eventually(lambda: store.get("out/quiet/a") is not None and store.get("out/loud") is not None)


def test_a_restart_under_the_same_identity_takes_over_its_crashed_predecessor_at_once(store, runners):
    # What a crashed server leaves behind: the key under its identity, bound to a live lease.
    stale = store.lease_grant(60)
    store.put(LEADER_RUNNER, {"identity": "server@/var/lib/ccattler"}, lease=stale)
    other = runners(store, [Copy()], identity="someone-else")
    time.sleep(0.5)
    assert not other.is_leader  # a different identity waits for the lease
    started = time.monotonic()
    restarted = runners(store, [Copy()], identity="server@/var/lib/ccattler")
    assert eventually(lambda: restarted.is_leader, timeout=5)
    assert time.monotonic() - started < 2
    assert not other.is_leader
    store.put("in/a", {"v": 1})
    assert eventually(lambda: store.get("out/a") is not None)


@dataclass
class Timed:
    """Writes `out/tick` once its time has come (a decision that changes with time alone, like a
    stabilization window ending) and says when by `next_due`."""

    name: ClassVar[str] = "timed"
    reads: ClassVar[tuple[str, ...]] = ("in/", "out/")
    writes: ClassVar[tuple[str, ...]] = ("out/",)
    at: float = 0.0
    calls: list[float] = field(default_factory=list)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        self.calls.append(now)
        return ChangeSet({"out/tick": {"at": self.at}} if now >= self.at else {}, frozenset())

    def next_due(self) -> float | None:
        return self.at


def test_a_controller_runs_again_at_the_time_it_names_without_a_change(sqlite_store, runners):
    timed = Timed(at=time.time() + 1.0)
    runners(sqlite_store, [timed], resync_interval=60.0)
    assert eventually(lambda: sqlite_store.get("out/tick") is not None, timeout=5)
    assert timed.calls[-1] >= timed.at and len(timed.calls) <= 3  # not polled: run at the time
    time.sleep(0.3)
    assert len(timed.calls) <= 3  # a time already past is not run in a loop
