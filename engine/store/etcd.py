"""The etcd backend: our `Store` on etcd v3's gRPC API, through python3-etcd3's generated stubs.

The high-level `etcd3` client is bypassed on purpose: its watcher loses the error when a stream
breaks (and so cannot resume without a gap) and its failover never retries. Knobs: the URL's
endpoints (tried in order, failing over to the next), `?prefix=` (prepended to every key),
`?timeout=` (seconds per call) and `?ca=&cert=&key=` (PEM files: TLS, mutual with cert and key).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import grpc
from etcd3 import etcdrpc

from ccattler.engine.facts import check_key
from ccattler.engine.store.base import (
    Compacted,
    Compare,
    Fact,
    Store,
    StoreError,
    Watch,
)
from ccattler.engine.store.etcd_conn import Connection, parse_endpoints
from ccattler.engine.store.etcd_keepalive import KeepaliveStream
from ccattler.engine.store.etcd_watch import EtcdWatch
from ccattler.engine.store.ops import decode, prepare_txn

__all__ = ["EtcdStore", "parse_endpoints"]

_PAGE = 2000  # keys per range page; pages are read at one revision, so the result is one snapshot
#: Reads per txn of `get_many`: etcd's default --max-txn-ops (a txn counts its reads too).
_GETS_PER_TXN = 128


class EtcdStore(Store):
    """The `Store` on an etcd cluster; thread-safe (gRPC channels are)."""

    def __init__(
        self,
        endpoints: list[tuple[str, int]],
        *,
        prefix: str = "",
        timeout: float = 5.0,
        credentials: grpc.ChannelCredentials | None = None,
        url: str | None = None,
    ) -> None:
        self.url = url or "etcd://" + ",".join(f"{host}:{port}" for host, port in endpoints)
        self._prefix = prefix.encode()
        self._conn = Connection(endpoints, self.url, timeout, credentials)
        self._watches: set[EtcdWatch] = set()
        self._keepalives = KeepaliveStream(self._conn)
        try:
            self.revision()  # fail now, naming the URL, if no endpoint answers
        except StoreError:
            self._conn.close()
            raise

    def _key(self, key: str) -> bytes:
        return self._prefix + key.encode()

    def _fact(self, kv: Any) -> Fact:
        key = kv.key[len(self._prefix) :].decode()
        return Fact(key, decode(kv.value), kv.create_revision, kv.mod_revision, kv.version, kv.lease or None)

    # -- reads -------------------------------------------------------------------------------

    def get(self, key: str) -> Fact | None:
        check_key(key)
        response = self._conn.call("KV", "Range", etcdrpc.RangeRequest(key=self._key(key)))
        return self._fact(response.kvs[0]) if response.kvs else None

    def get_many(self, keys: list[str]) -> dict[str, Fact]:
        """One read-only txn of `get`s per `_GETS_PER_TXN` keys (an agent's report reads every key it
        writes: one round trip each was a tenth of the API server's time at 200 nodes on etcd)."""
        for key in keys:
            check_key(key)
        found: dict[str, Fact] = {}
        for start in range(0, len(keys), _GETS_PER_TXN):
            ops = [etcdrpc.RequestOp(request_range=etcdrpc.RangeRequest(key=self._key(key)))
                   for key in keys[start : start + _GETS_PER_TXN]]
            response = self._conn.call("KV", "Txn", etcdrpc.TxnRequest(success=ops))
            for op in response.responses:
                for kv in op.response_range.kvs:
                    fact = self._fact(kv)
                    found[fact.key] = fact
        return found

    def range(self, prefix: str, revision: int | None = None) -> tuple[list[Fact], int]:
        start, end = self._range_bounds(prefix)
        facts: list[Fact] = []
        while True:
            request = etcdrpc.RangeRequest(key=start, range_end=end, revision=revision or 0, limit=_PAGE)
            response = self._conn.call("KV", "Range", request)
            revision = revision or response.header.revision
            facts.extend(self._fact(kv) for kv in response.kvs)
            if not response.more:
                return facts, revision
            start = response.kvs[-1].key + b"\0"

    def _range_bounds(self, prefix: str) -> tuple[bytes, bytes]:
        start = self._key(check_key(prefix, prefix=True))
        if not start:
            return b"\0", b"\0"  # etcd: every key
        end = bytearray(start)
        while end and end[-1] == 0xFF:
            end.pop()
        if not end:
            return start, b"\0"
        end[-1] += 1
        return start, bytes(end)

    def revision(self) -> int:
        request = etcdrpc.RangeRequest(key=self._prefix or b"\0", count_only=True)
        return self._conn.call("KV", "Range", request).header.revision

    # -- writes ------------------------------------------------------------------------------

    def txn(
        self,
        compares: Iterable[Compare] = (),
        puts: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
        deletes: Iterable[str] = (),
        lease: int | None = None,
    ) -> tuple[bool, int]:
        # The server enforces its own --max-txn-ops/--max-request-bytes; Connection names them.
        ops = prepare_txn(compares, puts, deletes, max_ops=None, max_bytes=None)
        success = [
            etcdrpc.RequestOp(request_put=_put(self._key(key), data, lease))
            for key, data in ops.puts
        ]
        success += [
            etcdrpc.RequestOp(request_delete_range=etcdrpc.DeleteRangeRequest(key=self._key(key)))
            for key in ops.deletes
        ]
        request = etcdrpc.TxnRequest(
            compare=[
                etcdrpc.Compare(
                    result=etcdrpc.Compare.EQUAL,
                    target=etcdrpc.Compare.MOD,
                    key=self._key(compare.key),
                    mod_revision=compare.mod_revision,
                )
                for compare in ops.compares
            ],
            success=success,
        )
        response = self._conn.call("KV", "Txn", request, write=True)
        return response.succeeded, response.header.revision

    # -- watches -----------------------------------------------------------------------------

    def watch(self, prefix: str, from_revision: int | None = None, max_bytes: int | None = None) -> Watch:
        start, end = self._range_bounds(prefix)
        if from_revision is None:
            from_revision = self.revision()
        watch = EtcdWatch(self._conn, prefix, start, end, from_revision, len(self._prefix), self.revision,
                          on_cancel=self._watches.discard, max_bytes=max_bytes)
        self._watches.add(watch)
        watch.start()
        return watch

    # -- leases ------------------------------------------------------------------------------

    def lease_grant(self, ttl: float) -> int:
        """A lease of `ttl` seconds, rounded up to whole seconds (etcd also enforces a minimum)."""
        if not ttl > 0:
            raise StoreError(f"lease TTL must be positive, got {ttl}")
        request = etcdrpc.LeaseGrantRequest(TTL=math.ceil(ttl))
        return self._conn.call("Lease", "LeaseGrant", request, write=True).ID

    def lease_keepalive(self, lease: int) -> int:
        return self._keepalives.keepalive(lease)  # one stream for all leases (engine/store/etcd_keepalive.py)

    def lease_revoke(self, lease: int) -> None:
        self._conn.call("Lease", "LeaseRevoke", etcdrpc.LeaseRevokeRequest(ID=lease), write=True)

    # -- maintenance -------------------------------------------------------------------------

    def compact(self, revision: int) -> None:
        current = self.revision()
        if revision > current:
            raise StoreError(f"cannot compact at {revision}: it is in the future (current {current})")
        try:
            self._conn.call("KV", "Compact", etcdrpc.CompactionRequest(revision=revision), write=True)
        except Compacted:
            pass  # already compacted past `revision`: a no-op, as in SQLite

    def close(self) -> None:
        for watch in list(self._watches):
            watch.cancel()
        self._keepalives.close()
        self._conn.close()


def _put(key: bytes, data: bytes, lease: int | None) -> etcdrpc.PutRequest:
    return etcdrpc.PutRequest(key=key, value=data, lease=lease or 0)
