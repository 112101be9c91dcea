"""The SQLite backend's tables, its connection settings and its single-owner file lock."""

from __future__ import annotations

import fcntl
import os
import sqlite3

from ccattler.engine.store.base import StoreUnavailable

# `kv` is the current state. `history` is the change log since the compaction revision: one row per
# revision whose `changes` is a JSON array of the changed keys, each with its previous version, so
# watches replay it and `range` at an older revision undoes it (one row per txn keeps batches cheap).
# `meta.revision` is written at compaction only; otherwise the newest history row is the revision.
SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY, value BLOB NOT NULL, create_rev INTEGER NOT NULL,
    mod_rev INTEGER NOT NULL, version INTEGER NOT NULL, lease INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_lease ON kv(lease) WHERE lease IS NOT NULL;
CREATE TABLE IF NOT EXISTS history (rev INTEGER PRIMARY KEY, changes BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS leases (id INTEGER PRIMARY KEY AUTOINCREMENT, ttl REAL NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO meta VALUES ('revision', 1), ('compacted', 0);
"""


def connect(path: str | None) -> sqlite3.Connection:
    """One autocommit connection (transactions are explicit), durable on disk: WAL, fsync on commit."""
    try:
        conn = sqlite3.connect(path or ":memory:", isolation_level=None, check_same_thread=False)
        if path is not None:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
        conn.executescript(SCHEMA)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open SQLite store {path}: {exc}") from None
    return conn


def connect_reader(path: str) -> sqlite3.Connection:
    """A second, read-only connection: in WAL mode its reads are not held up by the writer's fsync."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only=1")
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open SQLite store {path}: {exc}") from None
    return conn


class OwnerLock:
    """An exclusive fcntl lock on `<db>.lock`: one live process owns a store file at a time."""

    def __init__(self, db_path: str) -> None:
        self.path = db_path + ".lock"
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create lock file {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(self._fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            raise StoreUnavailable(
                f"SQLite store {db_path} is owned by another live process (pid {owner}); "
                "only one process may open it — reach it through that process's API. SQLite is the "
                "single-server embedded store (API and controllers in one `cca server`); for several "
                "API servers or a separate `cca runner`, use etcd (deploy/etcd/cluster.sh, "
                "cca init --etcd)"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1
