"""The embedded SQLite backend: one process owns the file, commits are durable, watches are in-process.

Knobs (URL query): `history` — revisions of change log kept for watch replay and `range` at an
older revision (default 100,000; older ones are compacted automatically); `max_txn_ops` and
`max_txn_bytes` — the per-transaction limits, the same as the etcd that CCattler starts.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from typing import Any

from ccattler.engine.facts import check_key
from ccattler.engine.store.base import (
    Compacted,
    Compare,
    Event,
    Fact,
    LeaseNotFound,
    Store,
    StoreError,
    Watch,
)
from ccattler.engine.store.group_commit import GroupCommit
from ccattler.engine.store.ops import MAX_TXN_BYTES, MAX_TXN_OPS, TxnOps, decode, prefix_end, prepare_txn
from ccattler.engine.store.queue_watch import QueueWatch
from ccattler.engine.store.sqlite_changes import change_event, decode_changes, encode_changes, previous_fact
from ccattler.engine.store.sqlite_files import make_private
from ccattler.engine.store.sqlite_leases import LeaseTable
from ccattler.engine.store.sqlite_schema import OwnerLock, connect, connect_reader

#: A resumed watch takes live commits only once it has replayed history (`_replay`).
_LATER = 1 << 62
#: History rows read per replay step.
_REPLAY_ROWS = 1_000

DEFAULT_HISTORY = 100_000
_CHUNK = 500  # keys per `IN (…)` lookup, well under SQLite's parameter limit

_KV_COLUMNS = "key, value, create_rev, mod_rev, version, lease"


def _fact(row: tuple) -> Fact:
    key, value, create_rev, mod_rev, version, lease = row
    return Fact(key, decode(value), create_rev, mod_rev, version, lease)


def _prefix_clause(prefix: str) -> tuple[str, tuple]:
    end = prefix_end(prefix)
    if end is None:
        return "1", ()
    return "key >= ? AND key < ?", (prefix, end)


class SqliteStore(Store):
    """The `Store` on one SQLite file (or `:memory:`); thread-safe through one lock."""

    keepalive_may_block = False  # leases are a dict under their own short lock (sqlite_leases.py)

    def __init__(
        self,
        path: str | None,
        *,
        history: int = DEFAULT_HISTORY,
        max_txn_ops: int = MAX_TXN_OPS,
        max_txn_bytes: int = MAX_TXN_BYTES,
        url: str | None = None,
    ) -> None:
        self.url = url or (f"sqlite://{path}" if path else "sqlite://:memory:")
        self._history = history
        self._max_ops = max_txn_ops
        self._max_bytes = max_txn_bytes
        if path is not None:
            make_private(path)  # before SQLite creates its WAL with the umask's mode
        self._owner = OwnerLock(path) if path is not None else None
        try:
            self._conn = connect(path)
        except StoreError:
            if self._owner:
                self._owner.release()
            raise
        try:
            # Reads use their own connection on a file, so neither waits for the other's work.
            self._reader = connect_reader(path) if path is not None else self._conn
        except StoreError:
            self._conn.close()
            if self._owner:
                self._owner.release()
            raise
        self._lock = threading.Lock()
        self._read_lock = threading.Lock() if path is not None else self._lock
        # Each watch with the revision it starts after (a watch may start in the future).
        self._watches: dict[QueueWatch, int] = {}
        self._replaying: dict[QueueWatch, int] = {}  # resumed watches → the history they have been given
        meta = dict(self._conn.execute("SELECT name, value FROM meta"))
        newest = self._conn.execute("SELECT MAX(rev) FROM history").fetchone()[0] or 0
        self._rev: int = max(meta["revision"], newest)
        self._compacted: int = meta["compacted"]
        # Leases restart with their full TTL, as etcd does after a leader change.
        self._leases = LeaseTable(self._conn.execute("SELECT id, ttl FROM leases"))
        self._closed = False
        self._group: GroupCommit[tuple[TxnOps, int | None], tuple[bool, int]] = GroupCommit(self._run_batch)
        self._expirer = threading.Thread(target=self._expire_leases, name="sqlite-leases", daemon=True)
        self._expirer.start()

    # -- reads -------------------------------------------------------------------------------

    def get(self, key: str) -> Fact | None:
        check_key(key)
        with self._reading() as conn:
            row = conn.execute(f"SELECT {_KV_COLUMNS} FROM kv WHERE key = ?", (key,)).fetchone()
        return _fact(row) if row else None

    def get_many(self, keys: list[str]) -> dict[str, Fact]:
        for key in keys:
            check_key(key)
        found: dict[str, Fact] = {}
        with self._reading() as conn:
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for row in conn.execute(f"SELECT {_KV_COLUMNS} FROM kv WHERE key IN ({marks})", chunk):
                    found[row[0]] = _fact(row)
        return found

    def range(self, prefix: str, revision: int | None = None) -> tuple[list[Fact], int]:
        where, args = _prefix_clause(check_key(prefix, prefix=True))
        logs: list[bytes] = []
        with self._reading() as conn:  # one read transaction: one snapshot; decoding happens after
            conn.execute("BEGIN")
            try:
                current, compacted = self._committed(conn)
                query = f"SELECT {_KV_COLUMNS} FROM kv WHERE {where} ORDER BY key"
                rows = conn.execute(query, args).fetchall()
                if not revision or revision == current:  # 0 means now, as in etcd
                    revision = current
                else:
                    _check_readable(revision, current, compacted)
                    undo = "SELECT changes FROM history WHERE rev > ? ORDER BY rev DESC"
                    logs = [blob for (blob,) in conn.execute(undo, (revision,))]
            finally:
                conn.execute("COMMIT")
        if not logs:
            return [_fact(row) for row in rows], revision
        state: dict[str, Fact | None] = {row[0]: _fact(row) for row in rows}
        # Undo every change after `revision`, newest first, so each key ends at its old version.
        for blob in logs:
            for change in reversed(decode_changes(blob)):
                if change[0].startswith(prefix):
                    state[change[0]] = previous_fact(change)
        return [fact for _key, fact in sorted(state.items()) if fact is not None], revision

    def revision(self) -> int:
        if self._closed:
            raise StoreError(f"store {self.url} is closed")
        return self._rev  # set once a commit is durable, so never ahead of what reads can see

    @staticmethod
    def _committed(conn: sqlite3.Connection) -> tuple[int, int]:
        """(revision, compaction revision) as of the connection's read transaction."""
        newest, revision, compacted = conn.execute(
            "SELECT (SELECT MAX(rev) FROM history), (SELECT value FROM meta WHERE name = 'revision'), "
            "(SELECT value FROM meta WHERE name = 'compacted')"
        ).fetchone()
        return max(newest or 0, revision), compacted

    # -- writes ------------------------------------------------------------------------------

    def txn(
        self,
        compares: Iterable[Compare] = (),
        puts: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
        deletes: Iterable[str] = (),
        lease: int | None = None,
    ) -> tuple[bool, int]:
        ops = prepare_txn(compares, puts, deletes, self._max_ops, self._max_bytes)
        return self._group.submit((ops, lease))

    def _run_batch(self, requests: list[tuple[TxnOps, int | None]]) -> list[tuple[bool, int] | StoreError]:
        try:
            with self._open():
                return self._commit_batch(requests)
        except StoreError as exc:  # the store is closed
            return [type(exc)(str(exc)) for _ in requests]

    def _commit_batch(self, requests: list[tuple[TxnOps, int | None]]) -> list[tuple[bool, int] | StoreError]:
        """Apply queued txns in order, each at its own revision, in one SQLite transaction (one fsync)."""
        outcomes: list[tuple[bool, int] | StoreError] = []
        written: list[tuple[int, bytes]] = []
        try:
            with self._transaction("commit failed"):
                for ops, lease in requests:
                    try:
                        outcomes.append(self._apply(ops, lease, written))
                    except LeaseNotFound as exc:
                        outcomes.append(exc)
        except StoreError as exc:  # rolled back: nothing of the batch was written
            return [type(exc)(str(exc)) for _ in requests]
        if written:
            self._rev = written[-1][0]
            for revision, blob in written:
                self._publish(revision, blob)
            self._trim_history()
        return outcomes

    def _apply(self, ops: TxnOps, lease: int | None, written: list[tuple[int, bytes]]) -> tuple[bool, int]:
        """One txn inside the open transaction; it sees the batch's earlier txns, as if committed."""
        current = written[-1][0] if written else self._rev
        for compare in ops.compares:
            row = self._conn.execute("SELECT mod_rev FROM kv WHERE key = ?", (compare.key,)).fetchone()
            if (row[0] if row else 0) != compare.mod_revision:
                return False, current
        if lease is not None and ops.puts and lease not in self._leases:
            raise LeaseNotFound(f"lease {lease} does not exist (expired or revoked)")
        old = self._current([key for key, _ in ops.puts] + list(ops.deletes))
        rev = current + 1
        kv_rows, changes = [], []
        for key, data in ops.puts:
            prev = old.get(key)
            create, version = (prev[2], prev[4] + 1) if prev else (rev, 1)
            kv_rows.append((key, data, create, rev, version, lease))
            changes.append((key, data, create, version, lease, prev))
        removed = [key for key in ops.deletes if key in old]
        changes.extend((key, None, None, None, None, old[key]) for key in removed)
        if not changes:
            return True, current
        written.append((rev, self._write(rev, changes, kv_rows, removed)))
        return True, rev

    def _current(self, keys: list[str]) -> dict[str, tuple]:
        found: dict[str, tuple] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for row in self._conn.execute(f"SELECT {_KV_COLUMNS} FROM kv WHERE key IN ({marks})", chunk):
                found[row[0]] = row
        return found

    def _write(self, rev: int, changes: list[tuple], kv_rows: list[tuple], removed: list[str]) -> bytes:
        """One revision's statements (inside an open transaction); returns its change-log row."""
        blob = encode_changes(changes)
        if kv_rows:
            self._conn.executemany(f"INSERT OR REPLACE INTO kv ({_KV_COLUMNS}) VALUES (?,?,?,?,?,?)", kv_rows)
        if removed:
            self._conn.executemany("DELETE FROM kv WHERE key = ?", [(key,) for key in removed])
        self._conn.execute("INSERT INTO history (rev, changes) VALUES (?, ?)", (rev, blob))
        return blob

    def _publish(self, rev: int, blob: bytes) -> None:
        """Hand a committed revision's events to the watches that want them."""
        if not self._watches:
            return
        events = [change_event(change, rev) for change in decode_changes(blob)]
        for watch, after in self._watches.items():
            if rev > after:
                matching = [event for event in events if event.key.startswith(watch.prefix)]
                if matching:  # weighed as their share of the change log entry (values and previous)
                    watch.push(matching, len(blob) * len(matching) // len(events))

    # -- watches -----------------------------------------------------------------------------

    def watch(self, prefix: str, from_revision: int | None = None, max_bytes: int | None = None) -> Watch:
        check_key(prefix, prefix=True)
        with self._open():
            watch = QueueWatch(prefix, self._unwatch, max_bytes=max_bytes,
                               after=self._rev if from_revision is None else from_revision,
                               refill=self._replay)
            if from_revision is not None and from_revision < self._rev:
                if from_revision + 1 < self._compacted:
                    watch.push([Event("resync", prefix, None, self._rev)])
                else:  # history first, at the reader's pace (`_replay`); live events after it
                    self._replaying[watch] = from_revision
                    self._watches[watch] = _LATER
                    return watch
            self._watches[watch] = max(from_revision or 0, self._rev)
        return watch

    def _replay(self, watch: QueueWatch) -> bool:
        """Queue the next part of a resumed watch's history (about half its byte bound); False
        once it has caught up and follows live commits (or the store closed). Paced so that a
        watch resumed far back costs the server one part at a time, never the whole history at once."""
        with self._lock:
            if self._closed:
                return False
            position = self._replaying.get(watch)
            if position is None:
                return False
            if position + 1 < self._compacted:  # compacted while it was catching up
                watch.push([Event("resync", watch.prefix, None, self._rev)])
                position = self._rev
            else:
                rows = self._conn.execute(
                    "SELECT rev, changes FROM history WHERE rev > ? ORDER BY rev LIMIT ?",
                    (position, _REPLAY_ROWS))
                used, read = 0, 0
                for rev, blob in rows:
                    read += 1
                    if used and used + len(blob) > watch.max_bytes // 2:
                        break  # the rest next time: a part never outgrows the bound
                    changes = decode_changes(blob)
                    matching = [change_event(c, rev) for c in changes if c[0].startswith(watch.prefix)]
                    if matching:
                        watch.push(matching, len(blob) * len(matching) // len(changes))
                    position, used = rev, used + len(blob)
                if not read:  # no history past it: caught up (never spin on a gap)
                    position = self._rev
            if position < self._rev:
                self._replaying[watch] = position
                return True
            del self._replaying[watch]
            if watch in self._watches:
                self._watches[watch] = position
            return False

    def _unwatch(self, watch: QueueWatch) -> None:
        with self._lock:
            self._watches.pop(watch, None)
            self._replaying.pop(watch, None)

    # -- leases ------------------------------------------------------------------------------

    def lease_grant(self, ttl: float) -> int:
        if not ttl > 0:
            raise StoreError(f"lease TTL must be positive, got {ttl}")
        with self._open():
            lease = self._conn.execute("INSERT INTO leases (ttl) VALUES (?)", (float(ttl),)).lastrowid
            self._leases.grant(lease, ttl)
        return lease

    def lease_keepalive(self, lease: int) -> int:
        if self._closed:
            raise StoreError(f"store {self.url} is closed")
        self._leases.keepalive(lease)  # never waits for the write lock
        return self._rev

    def lease_pardon(self, seconds: float) -> int:
        return self._leases.pardon(seconds)  # bounded: engine/store/sqlite_leases.py

    def lease_revoke(self, lease: int) -> None:
        with self._open():
            if lease not in self._leases:
                raise LeaseNotFound(f"lease {lease} does not exist (expired or revoked)")
            self._drop_lease(lease)

    def _drop_lease(self, lease: int) -> None:
        """Delete the lease's keys in one revision (with delete events), then the lease itself."""
        rows = self._conn.execute(f"SELECT {_KV_COLUMNS} FROM kv WHERE lease = ? ORDER BY key", (lease,))
        changes = [(row[0], None, None, None, None, row) for row in rows]
        rev = self._rev + 1
        with self._transaction(f"dropping lease {lease} failed"):
            blob = self._write(rev, changes, [], [change[0] for change in changes]) if changes else None
            self._conn.execute("DELETE FROM leases WHERE id = ?", (lease,))
        self._leases.remove(lease)
        if blob is not None:
            self._rev = rev
            self._publish(rev, blob)

    def _expire_leases(self) -> None:
        while (due := self._leases.wait_due()) is not None:
            with self._lock:  # keepalives may still come in meanwhile: each lease is checked again
                if self._closed:
                    return
                for lease in due:
                    if self._leases.expired(lease):
                        try:
                            self._drop_lease(lease)
                        except StoreError:
                            pass  # the commit failed and was rolled back; retry on the next pass

    # -- maintenance -------------------------------------------------------------------------

    def compact(self, revision: int) -> None:
        with self._open():
            if revision > self._rev:
                raise StoreError(f"cannot compact at {revision}: it is in the future (current {self._rev})")
            self._compact_locked(revision)

    def _compact_locked(self, revision: int) -> None:
        if revision <= self._compacted:
            return
        with self._transaction("compaction failed"):
            self._conn.execute("DELETE FROM history WHERE rev < ?", (revision,))
            self._conn.executemany(
                "UPDATE meta SET value = ? WHERE name = ?", [(revision, "compacted"), (self._rev, "revision")]
            )
        self._compacted = revision

    def _trim_history(self) -> None:
        """Keep about `history` revisions; compaction runs once 10 % more have piled up."""
        if self._rev - self._compacted > self._history * 1.1:
            try:
                self._compact_locked(self._rev - self._history)
            except StoreError:
                pass  # the log is only longer than wanted; the next commit tries again

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._leases.close()
            watches, self._watches = list(self._watches), {}
        self._expirer.join()
        for watch in watches:
            watch.cancel()
        with self._read_lock:
            if self._reader is not self._conn:
                self._reader.close()
        self._conn.close()
        if self._owner:
            self._owner.release()

    @contextmanager
    def _reading(self):
        with self._read_lock:
            if self._closed:
                raise StoreError(f"store {self.url} is closed")
            yield self._reader

    @contextmanager
    def _open(self):
        with self._lock:
            if self._closed:
                raise StoreError(f"store {self.url} is closed")
            yield

    @contextmanager
    def _transaction(self, what: str = "write failed"):
        """BEGIN … COMMIT (durable on return), or ROLLBACK and a `StoreError` saying `what`."""
        try:
            self._conn.execute("BEGIN")
            yield
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise StoreError(f"SQLite store {self.url}: {what}: {exc}") from None



def _check_readable(revision: int, current: int, compacted: int) -> None:
    if revision > current:
        raise StoreError(f"revision {revision} is in the future (current revision {current})")
    if revision < compacted:
        raise Compacted(f"revision {revision} has been compacted (oldest kept: {compacted})")
