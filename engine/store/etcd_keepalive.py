"""Lease keepalives to etcd over one long-lived LeaseKeepAlive stream, shared by every caller.

A keepalive used to open a stream of its own (send one request, read one reply, cancel). With the
synchronous gRPC API each such call also starts a thread to consume its request iterator, and at
1,000 nodes (a beat per node every TTL/3: ~300 a second) that set-up was what starved the API
server: beats timed out, leases expired and the cluster never settled (docs/benchmarks.md,
"1,000 nodes on the 3-member etcd"). etcd answers the requests of one stream in order, each reply
naming its lease, so one stream serves all: a caller queues its request and waits for the next
reply naming its lease. A broken stream fails its waiters, which retry (idempotent) on a new stream
to the next member until their deadline.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import grpc
from etcd3 import etcdrpc

from ccattler.engine.store.base import LeaseNotFound, StoreError, StoreUnavailable
from ccattler.engine.store.etcd_conn import REQUIRE_LEADER, Connection


class _Waiter:
    __slots__ = ("done", "ttl", "revision", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ttl = 0
        self.revision = 0
        self.error: StoreError | None = None


class _Stream:
    """One open LeaseKeepAlive call, its request queue and the waiters per lease (in order)."""

    def __init__(self, conn: Connection) -> None:
        self.index, stub = conn.stub("Lease")
        self.requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.waiters: dict[int, list[_Waiter]] = {}
        self.call = stub.LeaseKeepAlive(iter(self.requests.get, None), metadata=REQUIRE_LEADER)


class KeepaliveStream:
    """`keepalive(lease)` for any number of threads over one stream (opened on first use)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._stream: _Stream | None = None
        self._closed = False

    def keepalive(self, lease: int) -> int:
        """Renew `lease` and return the store's revision then; `LeaseNotFound` when it expired or
        was revoked, `StoreUnavailable` when no member renewed it within the connection's timeout."""
        deadline = time.monotonic() + self._conn.timeout
        while True:
            stream, waiter = self._send(lease)
            if not waiter.done.wait(max(0.0, deadline - time.monotonic())):
                self._abandon(stream, lease, waiter)
                raise StoreUnavailable(f"etcd at {self._conn.url}: lease {lease} keepalive timed out")
            if waiter.error is None:
                if waiter.ttl <= 0:
                    raise LeaseNotFound(f"lease {lease} does not exist (expired or revoked)")
                return waiter.revision
            if not isinstance(waiter.error, StoreUnavailable) or time.monotonic() >= deadline:
                raise waiter.error
            time.sleep(0.05)  # the stream broke: again on a new one (the next member)

    def close(self) -> None:
        with self._lock:
            stream, self._stream, self._closed = self._stream, None, True
        if stream is not None:
            stream.requests.put(None)
            stream.call.cancel()

    def _send(self, lease: int) -> tuple[_Stream, _Waiter]:
        waiter = _Waiter()
        with self._lock:
            if self._closed:
                raise StoreUnavailable(f"etcd at {self._conn.url}: the store is closed")
            stream = self._stream
            if stream is None:
                stream = self._stream = _Stream(self._conn)
                threading.Thread(target=self._read, args=(stream,), name="etcd-keepalive",
                                 daemon=True).start()
            stream.waiters.setdefault(lease, []).append(waiter)
        stream.requests.put(etcdrpc.LeaseKeepAliveRequest(ID=lease))
        return stream, waiter

    def _abandon(self, stream: _Stream, lease: int, waiter: _Waiter) -> None:
        """A reply that never came: the member may be stopped or cut off, and a stream to it would
        stay silent, so the next keepalive opens a new stream to the next member."""
        with self._lock:
            if waiter in stream.waiters.get(lease, ()):
                stream.waiters[lease].remove(waiter)
            stalled = self._stream is stream
            if stalled:
                self._stream = None
        if stalled:
            self._conn.fail_over(stream.index)
            stream.call.cancel()

    def _read(self, stream: _Stream) -> None:
        error: StoreError
        try:
            for reply in stream.call:
                with self._lock:
                    waiting = stream.waiters.get(reply.ID)
                    waiter = waiting.pop(0) if waiting else None
                if waiter is not None:
                    waiter.ttl, waiter.revision = reply.TTL, reply.header.revision
                    waiter.done.set()
            error = StoreUnavailable(f"etcd at {self._conn.url}: the keepalive stream ended")
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                self._conn.fail_over(stream.index)
            error = self._conn.error(exc)
            if exc.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED):
                broke = exc.code().name
                error = StoreUnavailable(f"etcd at {self._conn.url}: the keepalive stream broke ({broke})")
        with self._lock:
            if self._stream is stream:
                self._stream = None
            waiting = [w for ws in stream.waiters.values() for w in ws]
            stream.waiters.clear()
        stream.requests.put(None)
        for waiter in waiting:
            waiter.error = error
            waiter.done.set()
