"""One etcd watch stream per `Watch`, resumed from the last delivered revision + 1 after any break.

Gap-free: every (re)connect asks for `start_revision` = the next revision not yet delivered. History
older than the watch (a resumed watch) is taken at the reader's pace (`wait_room`), so replaying it
never overflows the byte bound (a reader that takes nothing for `REPLAY_STALL_SECONDS` meanwhile is
told it fell behind); live events past the bound make the resync of `QueueWatch`. When
etcd reports that revision compacted, the watch delivers a resync event at the current revision
and goes on from there. Reconnects back off from 50 ms to 1 s.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

import grpc
from etcd3 import etcdrpc
from etcd3.etcdrpc import kv_pb2

from ccattler.engine.store.base import Event, StoreError
from ccattler.engine.store.etcd_conn import REQUIRE_LEADER, Connection
from ccattler.engine.store.ops import decode
from ccattler.engine.store.queue_watch import QueueWatch

_BACKOFF_MIN, _BACKOFF_MAX = 0.05, 1.0


class EtcdWatch(QueueWatch):
    """A `Watch` fed by a thread that owns the gRPC stream and reconnects it."""

    def __init__(
        self,
        conn: Connection,
        prefix: str,
        start: bytes,
        end: bytes,
        from_revision: int,
        key_prefix_length: int,
        current_revision: Callable[[], int],
        on_cancel: Callable[[QueueWatch], None],
        max_bytes: int | None = None,
    ) -> None:
        super().__init__(prefix, on_cancel, max_bytes=max_bytes, after=from_revision)
        self._conn = conn
        self._start, self._end = start, end
        self._next = from_revision + 1
        self._strip = key_prefix_length
        self._current_revision = current_revision
        self._replay_to = current_revision()  # history up to here is replayed at the reader's pace
        self._stream_lock = threading.Lock()
        self._requests: queue.SimpleQueue | None = None
        self._call = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"etcd-watch {prefix}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        super().cancel()
        self._stopped.set()
        with self._stream_lock:
            self._close_stream()

    def _close_stream(self) -> None:
        if self._requests is not None:
            self._requests.put(None)
        if self._call is not None:
            self._call.cancel()

    def _run(self) -> None:
        backoff = _BACKOFF_MIN
        while not self.cancelled:
            try:
                self._stream()
                backoff = _BACKOFF_MIN  # the stream ended for a resync: reconnect at once
            except (grpc.RpcError, StoreError):
                if self._stopped.wait(backoff):
                    return
                backoff = min(backoff * 2, _BACKOFF_MAX)

    def _stream(self) -> None:
        """Follow one stream until it breaks (raises) or etcd says our revision was compacted."""
        index, stub = self._conn.stub("Watch")
        requests: queue.SimpleQueue = queue.SimpleQueue()
        create = etcdrpc.WatchCreateRequest(
            key=self._start, range_end=self._end, start_revision=self._next, prev_kv=True
        )
        requests.put(etcdrpc.WatchRequest(create_request=create))
        with self._stream_lock:
            if self.cancelled:
                return
            self._requests, self._call = requests, stub.Watch(_drain(requests), metadata=REQUIRE_LEADER)
            call = self._call
        try:
            for response in call:
                if response.compact_revision:
                    revision = self._current_revision()
                    self.push([Event("resync", self.prefix, None, revision)])
                    self._next = revision + 1
                    return
                if response.canceled:
                    raise StoreError(f"etcd cancelled the watch: {response.cancel_reason}")
                events = [(self._event(event), _size(event)) for event in response.events]
                if events and events[0][0].revision <= self._replay_to:
                    for event, size in events:  # history: etcd keeps it, so it can wait for room
                        if not self.wait_room(self.max_bytes // 2):
                            self._stopped.wait()  # told it fell behind: nothing more until cancel
                            return
                        self.push([event], size)
                elif events:
                    self.push([event for event, _ in events], sum(size for _, size in events))
                if events:
                    self._next = events[-1][0].revision + 1
        except grpc.RpcError as exc:
            if not self.cancelled and exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN):
                self._conn.fail_over(index)
            raise
        finally:
            with self._stream_lock:
                self._close_stream()
                self._requests = self._call = None
        if not self.cancelled:
            raise StoreError("etcd closed the watch stream")

    def _event(self, event) -> Event:
        kv = event.kv
        key = kv.key[self._strip :].decode()
        prev = decode(event.prev_kv.value) if event.HasField("prev_kv") else None
        if event.type == kv_pb2.Event.DELETE:
            return Event("delete", key, None, kv.mod_revision, prev)
        return Event("put", key, decode(kv.value), kv.mod_revision, prev)


def _size(event) -> int:
    """What an etcd event weighs: its key, value and previous value."""
    return len(event.kv.key) + len(event.kv.value) + len(event.prev_kv.value)


def _drain(requests: queue.SimpleQueue) -> Iterator:
    """The request side of the stream: what we queue, until None closes it."""
    while (request := requests.get()) is not None:
        yield request
