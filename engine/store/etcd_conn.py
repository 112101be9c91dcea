"""gRPC channels to the endpoints of one etcd cluster: calls with failover, and etcd's errors as ours."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import grpc
from etcd3 import etcdrpc

from ccattler.engine.store.base import (
    Compacted,
    LeaseNotFound,
    StoreError,
    StoreUnavailable,
    TxnTooLarge,
)

# Values are at most 1 MiB and ranges are paged, but a page of large values can pass gRPC's 4 MiB.
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]

#: gRPC metadata asking etcd to refuse (not queue) requests while the member has no leader.
REQUIRE_LEADER = (("hasleader", "true"),)
_RETRY_PAUSE = 0.1

# etcd's error text → (our error type, what to tell the user). Matched as substrings, in order.
_KNOWN_ERRORS: list[tuple[str, type[StoreError], str]] = [
    ("too many operations in txn request", TxnTooLarge,
     "the txn has more operations than the etcd server's --max-txn-ops limit; nothing was written"),
    ("request is too large", TxnTooLarge,
     "the txn is larger than the etcd server's --max-request-bytes limit; nothing was written"),
    ("larger than max", TxnTooLarge,
     "the txn is larger than the etcd server's --max-request-bytes limit; nothing was written"),
    ("required revision has been compacted", Compacted, "the requested revision has been compacted"),
    ("required revision is a future revision", StoreError, "the requested revision is in the future"),
    ("requested lease not found", LeaseNotFound, "the lease does not exist (expired or revoked)"),
]


def parse_endpoints(url: str, location: str) -> list[tuple[str, int]]:
    """`h1:p1,h2:p2` → [(h1, p1), (h2, p2)], or a `StoreError` naming the URL."""
    endpoints = []
    for part in location.split(","):
        host, sep, port = part.strip().rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise StoreError(f"store URL {url!r}: endpoint {part!r} is not host:port")
        endpoints.append((host, int(port)))
    return endpoints


class Connection:
    """The cluster's endpoints, one channel each; calls go to the current one and fail over in order."""

    def __init__(
        self,
        endpoints: list[tuple[str, int]],
        url: str,
        timeout: float,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.url = url
        self.timeout = timeout
        self._credentials = credentials
        self._targets = [f"{host}:{port}" for host, port in endpoints]
        self._channels: dict[int, grpc.Channel] = {}
        self._stubs: dict[tuple[int, str], Any] = {}
        self._current = 0
        self._lock = threading.Lock()

    def stub(self, service: str) -> tuple[int, Any]:
        """(endpoint index, stub) for the current endpoint."""
        with self._lock:
            index = self._current
            stub = self._stubs.get((index, service))
            if stub is None:
                channel = self._channels.get(index)
                if channel is None:
                    channel = self._channels[index] = self._open_channel(self._targets[index])
                stub = self._stubs[(index, service)] = getattr(etcdrpc, f"{service}Stub")(channel)
            return index, stub

    def _open_channel(self, target: str) -> grpc.Channel:
        if self._credentials is None:
            return grpc.insecure_channel(target, options=_CHANNEL_OPTIONS)
        return grpc.secure_channel(target, self._credentials, options=_CHANNEL_OPTIONS)

    def fail_over(self, index: int) -> None:
        """Endpoint `index` failed: move to the next one (unless another thread already did)."""
        with self._lock:
            if self._current == index:
                self._current = (index + 1) % len(self._targets)

    def call(
        self, service: str, method: str, request: Any, *, write: bool = False
    ) -> Any:
        """One unary call, failing over until `timeout` (keepalives stream: engine/store/etcd_keepalive.py).

        Calls require a leader, so a member cut off from the cluster refuses at once ("no leader")
        instead of hanging. A write is retried elsewhere only when it cannot have been applied (the
        connection was refused, or the member had no leader); otherwise its failure is reported as
        a retriable `StoreUnavailable`, never repeated behind the caller's back.
        """
        deadline = time.monotonic() + self.timeout
        for attempt in itertools.count(1):
            index, stub = self.stub(service)
            remaining = max(deadline - time.monotonic(), 0.05)
            try:
                return getattr(stub, method)(request, timeout=remaining, metadata=REQUIRE_LEADER)
            except grpc.RpcError as exc:
                if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise self.error(exc) from None
                self.fail_over(index)
                details = (exc.details() or "").lower()
                not_applied = "failed to connect" in details or "no leader" in details
                if (write and not not_applied) or time.monotonic() >= deadline:
                    raise self.error(exc) from None
                if attempt % len(self._targets) == 0:
                    time.sleep(_RETRY_PAUSE)  # every endpoint failed once: give the cluster a moment
        raise AssertionError("unreachable: the loop returns or raises")

    def error(self, exc: grpc.RpcError) -> StoreError:
        """etcd's gRPC error as one of ours, naming the URL and, for size errors, the limit."""
        details = exc.details() or str(exc.code())
        for text, kind, message in _KNOWN_ERRORS:
            if text in details:
                return kind(f"etcd at {self.url}: {message} ({details})")
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return StoreUnavailable(f"etcd at {self.url} is unreachable: {details}")
        if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return TxnTooLarge(f"etcd at {self.url}: the request exceeds a server limit "
                               f"(--max-request-bytes); nothing was written ({details})")
        return StoreError(f"etcd at {self.url}: {details}")

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._stubs.clear()
