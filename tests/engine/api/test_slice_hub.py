"""The slice hub routes each store change to the nodes it concerns: a node sees its placements and
addresses, the instance documents and service specs of what it runs, every subnet and node address;
a move deletes from the old node and brings everything to the new one; a resumed watch that missed
changes is told to resync. And a node may report an instance that moved to it from a dead node."""

from __future__ import annotations

import json
import time

import pytest

from ccattler.engine.api.client import ApiError
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.slice import SliceHub
from ccattler.engine.pki import NODE_LIFETIME, cert_pem, key_pem, new_key
from ccattler.engine.store import open_store

WEB = {"image": "busybox", "instances": 2}
VOLUME = {"kind": "volume", "tenant": "shop", "name": "data", "size": 1 << 30, "persistent": True}


def placement(node, service="shop/web", instance="web-a1"):
    return {"service": service, "instance": instance, "node": node}


@pytest.fixture
def store():
    with open_store("sqlite://:memory:") as opened:
        opened.txn((), [
            ("desired/service/shop/web", WEB),
            ("desired/service/shop/db", {"image": "busybox", "instances": 1}),
            ("derived/instance/shop/web/web-a1", {"image": "busybox"}),
            ("derived/instance/shop/db/db-0", {"image": "busybox"}),
            ("derived/placement/shop/web-a1", placement("n1")),
            ("derived/placement/shop/db-0", placement("n2", "shop/db", "db-0")),
            ("derived/network/ip/shop/web-a1", {"node": "n1", "ip": "10.0.1.2"}),
            ("derived/network/subnet/n1", {"node": "n1", "subnet": "10.0.1.0/24"}),
            ("derived/network/subnet/n2", {"node": "n2", "subnet": "10.0.2.0/24"}),
            ("derived/firewall/n2", {"rules": []}),
            ("desired/volume/shop/data", VOLUME),
        ], ())
        yield opened


def read_until(events, count):
    return [next(events) for _ in range(count)]


def initial(events):
    seen = []
    for event in events:
        if event.kind == "synced":
            return seen
        seen.append((event.kind, event.key))
    raise AssertionError("no synced event")


def test_a_node_sees_what_it_runs_and_nothing_of_other_nodes(store):
    hub = SliceHub(store)
    try:
        n1 = initial(hub.stream("n1", 0, lambda: True))
        assert sorted(k for _, k in n1) == [
            "derived/instance/shop/web/web-a1", "derived/network/ip/shop/web-a1",
            "derived/network/subnet/n1", "derived/network/subnet/n2",  # every subnet: the overlay
            "derived/placement/shop/web-a1", "desired/service/shop/web", "desired/volume/shop/data"]
        n2 = hub.stream("n2", 0, lambda: True)
        assert ("put", "desired/volume/shop/data") in initial(n2)  # volume declarations go everywhere
        changed = {**VOLUME, "persistent": False}
        store.put("desired/volume/shop/data", changed)
        assert [(e.kind, e.value) for e in read_until(n2, 1)] == [("put", changed)]
    finally:
        hub.close()


def test_a_move_deletes_from_the_old_node_and_brings_everything_to_the_new_one(store):
    hub = SliceHub(store)
    try:
        n1, n2 = hub.stream("n1", 0, lambda: True), hub.stream("n2", 0, lambda: True)
        initial(n1), initial(n2)
        store.put("derived/placement/shop/web-a1", placement("n2"))
        gone = {(e.kind, e.key) for e in read_until(n1, 3)}
        assert gone == {("delete", "derived/placement/shop/web-a1"), ("delete", "desired/service/shop/web"),
                        ("delete", "derived/instance/shop/web/web-a1")}
        came = {(e.kind, e.key): e.value for e in read_until(n2, 3)}
        assert came[("put", "desired/service/shop/web")] == WEB
        assert came[("put", "derived/placement/shop/web-a1")]["node"] == "n2"
        assert ("put", "derived/instance/shop/web/web-a1") in came
        store.put("derived/network/ip/shop/web-a1", {"node": "n2", "ip": "10.0.2.2"})
        assert [(e.kind, e.key) for e in read_until(n1, 1)] == [("delete", "derived/network/ip/shop/web-a1")]
        assert [(e.kind, e.value["ip"]) for e in read_until(n2, 1)] == [("put", "10.0.2.2")]
        store.put("desired/service/shop/web", {**WEB, "instances": 3})  # only where it runs now
        assert [e.value["instances"] for e in read_until(n2, 1)] == [3]
    finally:
        hub.close()


def test_a_watch_resumed_from_before_the_hubs_history_is_told_to_resync_and_ends(store):
    hub = SliceHub(store)
    try:
        first = hub.stream("n1", 0, lambda: True)
        initial(first)
        store.put("derived/placement/shop/web-b2", placement("n1", instance="web-b2"))
        deadline = time.monotonic() + 3  # bounded, so a stream that stays open fails, not hangs
        resumed = hub.stream("n1", 1, lambda: time.monotonic() < deadline)  # from before the hub loaded
        assert next(resumed).kind == "resync"
        store.put("derived/placement/shop/web-c3", placement("n1", instance="web-c3"))
        # the agent re-reads on a new stream: this one must end, not stay open beside it
        assert list(resumed) == []
        assert len(hub._subs["n1"]) == 1  # the first stream's only
    finally:
        hub.close()


def caught_up(hub, store):
    deadline = time.monotonic() + 5
    while hub.revision < store.revision():
        assert time.monotonic() < deadline, "the hub did not follow the store"
        time.sleep(0.01)


def synced_at(events):
    for event in events:
        if event.kind == "synced":
            return event.revision
    raise AssertionError("no synced event")


def test_a_watch_resumed_on_another_server_gets_what_it_missed_not_its_whole_slice(store):
    # two API servers' hubs on one store; the agent watched on the first, which then died
    first, second = SliceHub(store), SliceHub(store)
    second.start()
    try:
        revision = synced_at(first.stream("n1", 0, lambda: True))
        store.put("derived/placement/shop/web-b2", placement("n1", instance="web-b2"))
        store.put("derived/placement/shop/db-1", placement("n2", "shop/db", "db-1"))  # not n1's
        store.put("derived/network/subnet/n3", {"node": "n3", "subnet": "10.0.3.0/24"})  # everyone's
        caught_up(second, store)
        resumed = second.stream("n1", revision, lambda: True)
        got = [(e.kind, e.key) for e in read_until(resumed, 2)]
        assert got == [("put", "derived/placement/shop/web-b2"), ("put", "derived/network/subnet/n3")]
        store.put("derived/network/ip/shop/web-b2", {"node": "n1", "ip": "10.0.1.3"})
        assert [e.key for e in read_until(resumed, 1)] == ["derived/network/ip/shop/web-b2"]
    finally:
        first.close()
        second.close()


def test_the_history_keeps_its_bound_and_a_resume_from_before_it_resyncs(store):
    hub = SliceHub(store)
    hub.start()
    hub._history.limit = 2
    try:
        revision = synced_at(hub.stream("n1", 0, lambda: True))
        for i in range(3):  # one dispatch each: the hub caught up before the next
            store.put(f"derived/network/subnet/x{i}", {"node": f"x{i}", "subnet": f"10.9.{i}.0/24"})
            caught_up(hub, store)
        assert not hub._history.covers(revision)
        assert next(hub.stream("n1", revision, lambda: True)).kind == "resync"
        assert hub._history.covers(store.revision() - 1)
        latest = hub.stream("n1", store.revision() - 1, lambda: True)
        assert [e.key for e in read_until(latest, 1)] == ["derived/network/subnet/x2"]
    finally:
        hub.close()


def test_a_node_may_report_an_instance_moved_to_it_from_a_dead_node(cluster, tmp_path):
    ca = cluster.files.load_ca()
    clients = {}
    for node in ("n1", "n2"):
        key = new_key()
        (tmp_path / f"{node}.key").write_bytes(key_pem(key))
        cert = ca.issue(key.public_key(), name=node, kind="node", lifetime=NODE_LIFETIME)
        (tmp_path / f"{node}.crt").write_bytes(cert_pem(cert))
        clients[node] = cluster.client(cert=str(tmp_path / f"{node}.crt"), key=str(tmp_path / f"{node}.key"))
    key = "observed/instance/shop/web-a1"

    def report(node):
        obs = api_pb2.Observation(key=key, value_json=json.dumps({"node": node, "state": "running"}))
        clients[node].unary(clients[node].agent, "Report", api_pb2.ReportRequest(observations=[obs]))

    cluster.store.put("derived/placement/shop/web-a1", placement("n1"))
    report("n1")
    with pytest.raises(ApiError):  # not placed on n2: n1's document stays n1's
        report("n2")
    cluster.store.put("derived/placement/shop/web-a1", placement("n2"))  # n1 died; moved to n2
    report("n2")
    assert cluster.store.get(key).value["node"] == "n2"
    for client in clients.values():
        client.close()


def test_a_shared_document_changed_again_before_it_was_sent_is_sent_once_in_its_latest_version(store):
    hub = SliceHub(store)
    events = hub.batches("n1", 0, lambda: True)
    next(events)  # the initial slice
    for n in range(3):
        store.put("derived/endpoint/shop/web", {"endpoints": [n]})
    store.put("derived/network/subnet/n1", {"node": "n1", "subnet": "10.0.9.0/24"})
    deadline = time.monotonic() + 5
    while hub.revision < store.revision() and time.monotonic() < deadline:  # all routed, none sent
        time.sleep(0.01)
    seen = next(events)
    endpoint_puts = [e for e in seen if e.key == "derived/endpoint/shop/web"]
    assert len(endpoint_puts) == 1 and endpoint_puts[0].value == {"endpoints": [2]}
    assert any(e.key == "derived/network/subnet/n1" for e in seen)
    hub.close()


def test_every_node_sees_each_nodes_address_and_nothing_else_of_it(store):
    store.put("observed/node/n2", {"address": "192.168.80.2", "capacity": {"cpu": 4}, "labels": {"a": "b"}})
    hub = SliceHub(store, address_linger=0)
    try:
        n1 = hub.stream("n1", 0, lambda: True)
        assert ("put", "observed/node/n2") in initial(n1)
        assert hub._docs["observed/node/n2"] == {"address": "192.168.80.2"}  # no usage, labels, capacity
        store.put("observed/node/n2", {"address": "192.168.80.2", "capacity": {"cpu": 8}})  # heartbeat
        store.put("observed/node/n2", {"address": "192.168.80.9"})  # re-addressed
        assert [(e.kind, e.key, e.value) for e in read_until(n1, 1)] == [
            ("put", "observed/node/n2", {"address": "192.168.80.9"})]
        store.delete("observed/node/n2")
        assert [(e.kind, e.key) for e in read_until(n1, 1)] == [("delete", "observed/node/n2")]
    finally:
        hub.close()


def test_a_node_back_at_its_address_within_the_linger_costs_no_event(store):
    store.put("observed/node/n2", {"address": "192.168.80.2"})
    store.put("observed/node/n3", {"address": "192.168.80.3"})
    hub = SliceHub(store, address_linger=1.5)
    try:
        n1 = hub.stream("n1", 0, lambda: True)
        initial(n1)
        store.delete("observed/node/n2")  # its lease expired …
        store.put("observed/node/n2", {"address": "192.168.80.2", "capacity": {"cpu": 4}})  # … it is back
        store.delete("observed/node/n3")  # gone for good
        store.put("derived/network/subnet/n1", {"cidr": "10.0.1.0/24"})  # to read meanwhile
        assert [(e.kind, e.key) for e in read_until(n1, 1)] == [("put", "derived/network/subnet/n1")]
        # After the linger, the node still gone is deleted everywhere; the one back never was.
        assert [(e.kind, e.key) for e in read_until(n1, 1)] == [("delete", "observed/node/n3")]
        assert hub._docs.get("observed/node/n2") == {"address": "192.168.80.2"}
    finally:
        hub.close()


def test_every_node_gets_every_services_names(store):
    names = {"service": "shop/db", "name": "db.shop.cca.local", "ttl": 5,
             "records": [{"name": "db-0.db.shop.cca.local", "type": "A", "address": "10.0.2.2"}]}
    store.put("derived/dns/shop/db", names)
    hub = SliceHub(store)
    try:
        for node in ("n1", "n2", "n9"):  # n1 runs nothing of db; n9 nothing at all
            assert ("put", "derived/dns/shop/db") in initial(hub.stream(node, 0, lambda: True))
        n1 = hub.stream("n1", 0, lambda: True)
        initial(n1)
        store.delete("derived/dns/shop/db")
        assert [(e.kind, e.key) for e in read_until(n1, 1)] == [("delete", "derived/dns/shop/db")]
    finally:
        hub.close()


def test_a_rollout_document_goes_where_its_service_runs(store):
    """It carries the previous spec's fields: the agents building old instances need it."""
    rollout = {"spec": "v2", "fields": {"v1": {"env": {"MODE": "old"}}}}
    store.put("derived/rollout/shop/web", rollout)
    hub = SliceHub(store)
    try:
        n1, n2 = hub.stream("n1", 0, lambda: True), hub.stream("n2", 0, lambda: True)
        assert ("put", "derived/rollout/shop/web") in initial(n1)
        assert ("put", "derived/rollout/shop/web") not in initial(n2)
        store.put("derived/rollout/shop/web", {**rollout, "state": "complete"})
        assert [(e.kind, e.key) for e in read_until(n1, 1)] == [("put", "derived/rollout/shop/web")]
        store.put("derived/placement/shop/web-a1", placement("n2"))
        assert ("delete", "derived/rollout/shop/web") in {(e.kind, e.key) for e in read_until(n1, 4)}
        assert ("put", "derived/rollout/shop/web") in {(e.kind, e.key) for e in read_until(n2, 4)}
    finally:
        hub.close()
