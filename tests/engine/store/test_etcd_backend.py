"""What only the etcd backend promises: failover, reconnects without gaps, prefixes, server limits."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import grpc
import pytest
from etcd3 import etcdrpc

from ccattler.engine.pki.ca import CertificateAuthority, cert_pem, key_pem, new_key
from ccattler.engine.store import LeaseNotFound, StoreError, StoreUnavailable, TxnTooLarge, open_store
from ccattler.engine.store.etcd_process import EtcdCluster, EtcdProcess, EtcdTls, free_port

pytestmark = pytest.mark.store


def raw_get(etcd, key: bytes):
    with grpc.insecure_channel(etcd.endpoint) as channel:
        response = etcdrpc.KVStub(channel).Range(etcdrpc.RangeRequest(key=key), timeout=5)
    return response.kvs[0].value if response.kvs else None


def test_a_dead_first_endpoint_fails_over_to_the_next(etcd_server):
    with open_store(f"etcd://127.0.0.1:{free_port()},{etcd_server.endpoint}?prefix=/failover/") as store:
        revision = store.put("a", {"ok": True})
        assert store.get("a").mod_revision == revision


def put_retrying(store, key, value):
    """What every writer does: retry a write whose outcome was unknown (a retriable error)."""
    for _ in range(10):
        try:
            return store.put(key, value)
        except StoreUnavailable as exc:
            assert exc.retriable
    raise AssertionError(f"put {key} kept failing")


def test_reads_writes_and_watches_go_on_when_the_member_in_use_dies():
    with EtcdCluster(3) as cluster, open_store(cluster.url + "?timeout=1") as store:
        with store.watch("f/") as watch:
            before = store.put("f/a", 1)
            lease = store.lease_grant(30)
            in_use = store._conn.stub("KV")[0]  # the endpoint this client talks to
            cluster.members[in_use].kill()
            # A write in flight when the leader dies may time out (outcome unknown): retry it.
            after = [put_retrying(store, f"f/{i}", i) for i in range(3)]
            assert store.get("f/2").value == 2
            store.lease_keepalive(lease)  # leases live in the cluster, not in the member that died
            seen = []
            while not set(after) <= {event.revision for event in seen}:
                event = watch.get(timeout=10)
                assert event is not None, f"watch stalled after {seen}"
                seen.append(event)
        revisions = [event.revision for event in seen]
        assert revisions[0] == before and revisions == sorted(set(revisions))


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


def test_get_many_reads_in_one_txn_per_128_keys_within_the_default_txn_limit():
    with EtcdProcess(max_txn_ops=128) as etcd, open_store(etcd.url) as store:
        store.txn(puts={f"o/{i:03}": i for i in range(100)})
        store.txn(puts={f"o/{i:03}": i for i in range(100, 200)})
        calls = []
        call = store._conn.call
        store._conn.call = lambda *args, **kw: calls.append(args[1]) or call(*args, **kw)
        keys = [f"o/{i:03}" for i in range(300)]  # 100 of them do not exist
        found = store.get_many(keys)
        assert calls == ["Txn", "Txn", "Txn"]  # 128 + 128 + 44 reads, not 300 round trips
        assert sorted(found) == keys[:200]
        assert found["o/007"].value == 7 and found["o/007"].mod_revision > 0


def write_tls_files(directory) -> EtcdTls:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files."""
    ca = CertificateAuthority.create("etcd-test-ca")
    paths = {}
    for name, server in (("server", True), ("client", False)):
        key = new_key()
        cert = ca.issue(key.public_key(), name=f"etcd-{name}", kind="etcd", lifetime=timedelta(hours=1),
                        hosts=("127.0.0.1",), server=server)
        paths[f"{name}_cert"] = directory / f"{name}.crt"
        paths[f"{name}_key"] = directory / f"{name}.key"
        paths[f"{name}_cert"].write_bytes(cert_pem(cert))
        paths[f"{name}_key"].write_bytes(key_pem(key))
    (directory / "ca.crt").write_bytes(cert_pem(ca.cert))
    return EtcdTls(ca=str(directory / "ca.crt"), **{name: str(path) for name, path in paths.items()})


def test_mutual_tls_to_etcd_and_clear_errors_without_it(tmp_path):
    tls = write_tls_files(tmp_path)
    with EtcdProcess(tls=tls) as etcd:
        with open_store(etcd.url) as store, store.watch("t/") as watch:
            revision = store.put("t/a", {"secure": True})
            assert watch.get(timeout=5).revision == revision
        with pytest.raises(StoreUnavailable, match="unreachable") as plaintext:
            open_store(f"etcd://{etcd.endpoint}?timeout=1")
        assert etcd.endpoint in str(plaintext.value)
        with pytest.raises(StoreUnavailable):  # the server demands a client certificate
            open_store(f"etcd://{etcd.endpoint}?ca={tls.ca}&timeout=1")
    with pytest.raises(StoreError, match="cert and key together"):
        open_store(f"etcd://127.0.0.1:1?ca={tls.ca}&cert={tls.client_cert}")
    with pytest.raises(StoreError, match="cannot read ca file /no/ca.pem"):
        open_store("etcd://127.0.0.1:1?ca=/no/ca.pem")


def test_keepalives_of_many_leases_from_many_threads_share_one_stream(etcd_server):
    """300 beats a second at 1,000 nodes: each keepalive opening a stream (and the sync gRPC API a
    thread for it) starved the server; all of them now go over one LeaseKeepAlive stream."""
    with open_store(f"{etcd_server.url}?prefix=/keepalive/") as store:
        leases = [store.lease_grant(30) for _ in range(20)]
        store.lease_keepalive(leases[0])
        stream = store._keepalives._stream
        threads_before = threading.active_count()
        errors = []

        def beat(offset: int) -> None:
            try:
                for i in range(20):
                    store.lease_keepalive(leases[(offset + i) % len(leases)])
            except Exception as exc:  # reported below
                errors.append(exc)

        beaters = [threading.Thread(target=beat, args=(n,)) for n in range(10)]
        for thread in beaters:
            thread.start()
        for thread in beaters:
            thread.join(timeout=30)
        assert not errors
        assert store._keepalives._stream is stream  # 200 keepalives, one stream
        assert threading.active_count() <= threads_before
        store.lease_revoke(leases[0])
        with pytest.raises(LeaseNotFound):
            store.lease_keepalive(leases[0])
