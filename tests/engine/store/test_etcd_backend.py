"""What only the etcd backend promises: failover, reconnects without gaps, prefixes, server limits."""

from __future__ import annotations

import json

import grpc
import pytest
from etcd3 import etcdrpc

from ccattler.engine.store import TxnTooLarge, open_store
from ccattler.engine.store.etcd_process import EtcdProcess, free_port

pytestmark = pytest.mark.store


def raw_get(etcd, key: bytes):
    with grpc.insecure_channel(etcd.endpoint) as channel:
        response = etcdrpc.KVStub(channel).Range(etcdrpc.RangeRequest(key=key), timeout=5)
    return response.kvs[0].value if response.kvs else None


def test_a_dead_first_endpoint_fails_over_to_the_next(etcd_server):
    with open_store(f"etcd://127.0.0.1:{free_port()},{etcd_server.endpoint}?prefix=/failover/") as store:
        revision = store.put("a", {"ok": True})
        assert store.get("a").mod_revision == revision


def test_the_prefix_is_prepended_and_values_are_canonical_json(etcd_server):
    one, two = open_store(f"{etcd_server.url}?prefix=/p1/"), open_store(f"{etcd_server.url}?prefix=/p2/")
    with one, two:
        one.put("k", {"b": 2, "a": "é"})
        assert two.get("k") is None
        assert [fact.key for fact in one.range("")[0]] == ["k"]
    assert raw_get(etcd_server, b"/p1/k") == json.dumps({"a": "é", "b": 2}, separators=(",", ":"),
                                                         ensure_ascii=False).encode()


def test_a_watch_resumes_without_a_gap_when_etcd_restarts():
    with EtcdProcess() as etcd, open_store(etcd.url) as store:
        with store.watch("w/") as watch:
            before = [store.put(f"w/{i}", i) for i in range(3)]
            etcd.restart()
            after = [store.put(f"w/{i}", i) for i in range(3, 6)]
            events = [watch.get(timeout=10) for _ in range(6)]
        assert [event.revision for event in events if event] == before + after
        assert [event.value for event in events if event] == list(range(6))


def test_a_server_with_lower_limits_refuses_the_whole_txn_naming_its_limit():
    with EtcdProcess(max_txn_ops=128, max_request_bytes=1024 * 1024) as etcd, open_store(etcd.url) as store:
        with pytest.raises(TxnTooLarge, match="--max-txn-ops"):
            store.txn(puts={f"o/{i:03}": i for i in range(129)})
        with pytest.raises(TxnTooLarge, match="--max-request-bytes"):
            store.txn(puts={f"b/{i}": "x" * 400_000 for i in range(3)})
        assert store.range("")[0] == []
        store.txn(puts={f"o/{i:03}": i for i in range(128)})
