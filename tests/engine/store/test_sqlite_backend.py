"""What only the SQLite backend promises: durability settings, reopening, one owner, bounded history."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import pytest

from ccattler.engine.store import Compacted, StoreError, StoreUnavailable, open_store

pytestmark = pytest.mark.store


@pytest.fixture
def url(tmp_path):
    return f"sqlite://{tmp_path}/state.db"


def test_the_file_is_in_wal_mode_with_fsync_on_commit(url, tmp_path):
    with open_store(url) as store:
        store.put("a", 1)
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    with sqlite3.connect(tmp_path / "state.db") as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_keeps_facts_revision_and_history(url):
    with open_store(url) as store:
        first = store.put("r/a", 1)
        last = store.put("r/a", 2)
    with open_store(url) as store:
        assert store.revision() == last
        assert store.get("r/a").value == 2
        assert store.range("r/", first)[0][0].value == 1
        with store.watch("r/", first) as watch:
            event = watch.get(timeout=1)
        assert (event.value, event.prev_value, event.revision) == (2, 1, last)
        assert store.put("r/b", 3) == last + 1


def test_a_file_owned_by_another_live_process_is_refused(url):
    owner = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from ccattler.engine.store import open_store; s = open_store(sys.argv[1]); "
         "print('open', flush=True); time.sleep(60)", url],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert owner.stdout.readline().strip() == "open"
        with pytest.raises(StoreUnavailable, match=f"owned by another live process \\(pid {owner.pid}\\)"):
            open_store(url)
    finally:
        owner.kill()
        owner.wait()
    with open_store(url) as store:  # the owner died: its lock went with it
        store.put("a", 1)


def test_a_second_open_in_the_same_process_is_refused_until_close(url):
    first = open_store(url)
    with pytest.raises(StoreUnavailable, match="owned by another live process"):
        open_store(url)
    first.close()
    open_store(url).close()


def test_leases_survive_a_reopen_and_then_expire(url):
    with open_store(url) as store:
        lease = store.lease_grant(1)
        store.put("n/a", 1, lease=lease)
    with open_store(url) as store:
        assert store.get("n/a").lease == lease
        store.lease_keepalive(lease)
        deadline = time.monotonic() + 5
        while store.get("n/a") is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.get("n/a") is None


def test_a_keepalive_does_not_wait_for_a_write_in_progress(url):
    with open_store(url) as store:
        lease = store.lease_grant(5)
        with store._lock:  # what a long commit holds
            started = time.monotonic()
            store.lease_keepalive(lease)
            assert time.monotonic() - started < 0.5


def test_a_stall_of_the_whole_process_does_not_count_against_leases(url):
    with open_store(url) as store:
        lease = store.lease_grant(1)
        store.put("n/a", 1, lease=lease)
        with store._leases._lock:  # nothing lease-related runs: neither keepalives nor expiry
            time.sleep(2.5)
        time.sleep(0.2)
        assert store.get("n/a") is not None  # the deadline moved by the stall
        store.lease_keepalive(lease)
        deadline = time.monotonic() + 5
        while store.get("n/a") is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.get("n/a") is None  # and without keepalives it still expires


def test_a_pardon_moves_deadlines_on_but_at_most_one_ttl_past_the_last_keepalive(url):
    with open_store(url) as store:
        lease = store.lease_grant(2)
        store.put("n/a", 1, lease=lease)
        time.sleep(1.0)
        assert store.lease_pardon(1.5) == 1  # the API server's loop lagged: 1.5 s more
        time.sleep(1.8)  # 2.8 s after the grant: past the TTL, within TTL + pardon
        assert store.get("n/a") is not None
        assert store.lease_pardon(100.0) == 1  # however long the lag: at most grant + 2 TTLs
        deadline = time.monotonic() + 5
        while store.get("n/a") is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.get("n/a") is None  # a node that stopped beating still goes


def test_history_is_bounded_and_older_revisions_are_compacted(tmp_path):
    with open_store(f"sqlite://{tmp_path}/state.db?history=10") as store:
        first = store.put("h/a", 0)
        for i in range(1, 30):
            store.put("h/a", i)
        with pytest.raises(Compacted):
            store.range("h/", first)
        with store.watch("h/", first) as watch:
            assert watch.get(timeout=1).kind == "resync"
        rows = store._conn.execute("SELECT COUNT(*) FROM history").fetchone()[0]
        assert rows <= 12  # history plus the 10 % slack that batches the compactions
        recent = store.revision() - 5
        assert store.range("h/", recent)[0][0].value == 24


def test_a_closed_store_says_so(url):
    store = open_store(url)
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        store.get("a")


def test_a_failed_commit_writes_nothing_and_the_store_goes_on(url):
    with open_store(url) as store, store.watch("full/") as watch:
        before = store.put("full/a", 1)
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count={pages}")  # the disk is "full" from now on
        with pytest.raises(StoreError, match="commit failed: database or disk is full"):
            store.txn(puts={f"full/{i:04}": "x" * 2000 for i in range(200)})
        assert store.revision() == before
        assert [fact.key for fact in store.range("full/")[0]] == ["full/a"]
        store._conn.execute("PRAGMA max_page_count=1073741823")
        after = store.put("full/b", 2)
        assert after == before + 1
        assert [event.revision for event in (watch.get(timeout=1), watch.get(timeout=1))] == [before, after]


def test_reads_do_not_wait_for_a_commit_in_progress(url):
    with open_store(url) as store:
        revision = store.put("r/a", 1)
        with store._lock:  # what a batch holds while it writes and fsyncs
            assert store.get("r/a").value == 1
            assert store.range("r/") == (store.range("r/", revision)[0], revision)


def test_an_open_read_snapshot_does_not_block_writers(url):
    with open_store(url) as store:
        before = store.put("r/a", 1)
        with store._reading() as reader:
            reader.execute("BEGIN")
            assert reader.execute("SELECT COUNT(*) FROM kv").fetchone()[0] == 1
            after = store.put("r/a", 2)  # WAL: the writer goes ahead of the open read
            assert store._committed(reader)[0] == before  # the snapshot still sees the old revision
            reader.execute("COMMIT")
        assert after == before + 1 and store.get("r/a").value == 2


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "state.db"
    path.write_text("these are not the facts you are looking for\n" * 100)
    with pytest.raises(StoreUnavailable, match=f"cannot open SQLite store {path}: file is not a database"):
        open_store(f"sqlite://{path}")
    path.unlink()
    open_store(f"sqlite://{path}").close()  # the owner lock was released on the way out

