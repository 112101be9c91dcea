"""The store interface every backend implements (SQLite embedded, etcd), and its value types.

Semantics follow etcd: one global revision, bumped once per successful write transaction; each
key carries create/mod revisions and a version; compares are on mod_revision with 0 = absent.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ccattler.engine.facts import CcaError


class StoreError(CcaError):
    """A store operation failed."""


class StoreUnavailable(StoreError):
    """The store cannot be reached (etcd down, file locked by another process)."""

    retriable = True


class TxnTooLarge(StoreError):
    """A transaction exceeds the backend's operation or byte limit; nothing was written."""


class Compacted(StoreError):
    """The requested revision has been compacted away."""


class LeaseNotFound(StoreError):
    """The lease does not exist (expired or revoked)."""


@dataclass(frozen=True, slots=True)
class Fact:
    key: str
    value: Any
    create_revision: int
    mod_revision: int
    version: int
    lease: int | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One change seen by a watch. `kind` "resync" means history was compacted: re-read."""

    kind: Literal["put", "delete", "resync"]
    key: str
    value: Any
    revision: int
    prev_value: Any = None


@dataclass(frozen=True, slots=True)
class Compare:
    """A txn guard: the key's mod_revision must equal `mod_revision` (0 = the key is absent)."""

    key: str
    mod_revision: int


class Watch(abc.ABC):
    """An ordered, gap-free stream of events; iterate it, or `get(timeout)` one event."""

    @abc.abstractmethod
    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, or None after `timeout` seconds (or once cancelled)."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Stop the watch; pending `get` calls return None."""

    def __iter__(self) -> Iterator[Event]:
        while True:
            event = self.get()
            if event is None:
                return
            yield event

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class Store(abc.ABC):
    """One fact store. Values are JSON documents; keys are checked by `engine.facts.check_key`."""

    url: str
    #: False when `lease_keepalive` never waits on I/O or the write lock (the leases live in this
    #: process): a caller on an event loop may then call it inline instead of in a thread.
    keepalive_may_block: bool = True

    @abc.abstractmethod
    def get(self, key: str) -> Fact | None: ...

    def get_many(self, keys: list[str]) -> dict[str, Fact]:
        """The facts of those `keys` that exist (backends may read them in one query)."""
        return {key: fact for key in keys if (fact := self.get(key)) is not None}

    @abc.abstractmethod
    def range(self, prefix: str, revision: int | None = None) -> tuple[list[Fact], int]:
        """All facts under `prefix` at one revision (default: now), sorted by key."""

    @abc.abstractmethod
    def txn(
        self,
        compares: Iterable[Compare] = (),
        puts: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
        deletes: Iterable[str] = (),
        lease: int | None = None,
    ) -> tuple[bool, int]:
        """Apply all puts and deletes atomically if every compare holds: (succeeded, revision)."""

    def put(self, key: str, value: Any, lease: int | None = None) -> int:
        return self.txn((), [(key, value)], (), lease=lease)[1]

    def delete(self, key: str) -> int:
        return self.txn((), (), [key])[1]

    @abc.abstractmethod
    def revision(self) -> int:
        """The current revision."""

    @abc.abstractmethod
    def watch(self, prefix: str, from_revision: int | None = None, max_bytes: int | None = None) -> Watch:
        """Events under `prefix` with revision > `from_revision` (default: from now on).

        Pass the revision a `range` returned to see every change after that snapshot. If that
        history has been compacted, the first event is `Event("resync", prefix, None, R)`: re-read
        with `range(prefix)` (at R or later); the watch goes on with the events after R. A reader
        that falls 100,000 events or `max_bytes` (default `queue_watch.MAX_BYTES`) behind gets a
        resync in place of its backlog, whose value says so (`queue_watch.behind`).
        """

    @abc.abstractmethod
    def lease_grant(self, ttl: float) -> int: ...

    @abc.abstractmethod
    def lease_keepalive(self, lease: int) -> int:
        """Refresh the lease and return the store's revision then (a heartbeat's reply carries it:
        no second round trip to ask); raise `LeaseNotFound` if it has expired."""

    @abc.abstractmethod
    def lease_revoke(self, lease: int) -> None: ...

    def lease_pardon(self, seconds: float) -> int:
        """The caller that serves keepalives (the API server) was stalled for `seconds`: a store
        that keeps its leases in this process moves their deadlines on by that much, bounded (see
        `SqliteStore`); returns how many moved. etcd keeps its leases in its own members: nothing
        to do here (0)."""
        return 0

    @abc.abstractmethod
    def compact(self, revision: int) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
