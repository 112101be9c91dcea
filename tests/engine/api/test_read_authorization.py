"""Issue 12 class 5: authorization follows the key on every read path. Two tenants, a reader of
tenant `a` (role scoped to `a`, through a bearer token) tries Get, Watch, events and Explain of
tenant `b`, cluster keys, secrets' values and the whole store: each is denied or filtered."""

from __future__ import annotations

import json

import grpc
import pytest

from ccattler.engine.api import read_access
from ccattler.engine.api.client import ApiError, Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2

SERVICE = {"kind": "service", "image": "registry.local:5000/app:1.0", "instances": 1,
           "resources": {"cpu": 100, "memory": 64 << 20}}
GRANT_KEY = "desired/grant/ann-reads-a"


def seed(store):
    docs = {
        "desired/role/reader-a": {"kind": "role", "name": "reader-a", "source": "auth.cca",
                                  "allow": ["secret.read", "service.read"], "scopes": ["a"]},
        GRANT_KEY: {"kind": "grant", "name": "ann-reads-a", "source": "auth.cca", "role": "reader-a",
                    "to": "user", "subject": "ann"},
        "desired/service/a/web": SERVICE | {"tenant": "a", "name": "web"},
        "desired/service/b/pay": SERVICE | {"tenant": "b", "name": "pay"},
        "derived/instance/a/web/web-1": {"service": "a/web", "name": "web-1"},
        "derived/instance/b/pay/pay-1": {"service": "b/pay", "name": "pay-1"},
        "derived/placement/b/pay-1": {"service": "b/pay", "instance": "pay-1", "node": "n1"},
        "observed/instance/b/pay-1": {"node": "n1", "state": "running"},
        "derived/network/ip/b/pay-1": {"instance": "pay-1", "service": "b/pay", "ip": "10.88.1.2"},
        "desired/secret/a/k": {"kind": "secret", "tenant": "a", "name": "k", "description": None},
        "desired/secret/b/k": {"kind": "secret", "tenant": "b", "name": "k", "description": None},
        "secret/b/k": {"version": 1, "ciphertext": "B-CIPHERTEXT"},
        "derived/firewall/n1": {"node": "n1", "policies": {"b/pay": {"local": ["10.88.1.2"]}}},
        "derived/identity/b/pay": {"identity": "b/pay", "addresses": ["10.88.1.2"]},
    }
    store.txn((), list(docs.items()), ())


@pytest.fixture
def two_tenants(cluster):
    seed(cluster.store)
    with cluster.client() as admin:
        admin.json("UserCreate", api_pb2.UserRequest(name="ann"))
        token = admin.unary(admin.cluster, "UserToken", api_pb2.UserRequest(name="ann")).token
    with Client(cluster.context(cert=None, key=None, token=token), timeout=10) as ann:
        yield cluster, ann


def denied(call, *args):
    with pytest.raises(ApiError) as err:
        call(*args)
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED, err.value
    return err.value


def get(client, kind, tenant="", all_tenants=False, name=""):
    request = api_pb2.GetRequest(kind=kind, tenant=tenant, all_tenants=all_tenants, name=name)
    return client.json("Get", request)


def watched(cluster, client, prefix, sentinel="desired/service/a/zz-sentinel"):
    """Every key a watch from revision 1 streams until `sentinel` (put by the admin) arrives."""
    stream = client.cluster.Watch(api_pb2.WatchRequest(prefix=prefix, from_revision=1), timeout=20)
    cluster.store.put("observed/instance/b/pay-9", {"node": "n1"})  # another tenant's, live
    cluster.store.put(sentinel, SERVICE | {"tenant": "a", "name": "zz-sentinel"})
    keys = []
    try:
        for event in stream:
            keys.append(event.key)
            if event.key == sentinel:
                break
    finally:
        stream.cancel()
    return keys


def watch_refused(client, prefix):
    stream = client.cluster.Watch(api_pb2.WatchRequest(prefix=prefix), timeout=10)
    with pytest.raises(grpc.RpcError) as err:
        next(iter(stream))
    return err.value


def test_get_of_another_tenant_is_denied_and_every_tenant_is_filtered(two_tenants):
    _, ann = two_tenants
    assert [r["name"] for r in get(ann, "services", "a")["items"]] == ["web"]
    for kind in ("services", "instances", "secrets", "gates"):
        denied(get, ann, kind, "b")
    assert {r["tenant"] for r in get(ann, "services", all_tenants=True)["items"]} == {"a"}
    assert {r["tenant"] for r in get(ann, "instances", all_tenants=True)["items"]} == {"a"}
    assert [r["key"] for r in get(ann, "secrets", all_tenants=True)["items"]] == ["secret/a/k"]
    with pytest.raises(ApiError) as err:  # a named row of another tenant is not found, not shown
        get(ann, "services", all_tenants=True, name="b/pay")
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    denied(get, ann, "roles")
    denied(get, ann, "nodes")
    secrets = ann.json("SecretList", api_pb2.SecretRequest(name="*"))["items"]
    assert [r["key"] for r in secrets] == ["secret/a/k"]


def test_events_show_only_keys_the_caller_may_read(two_tenants):
    cluster, ann = two_tenants
    keys = [r["key"] for r in get(ann, "events")["items"]]
    assert "desired/service/a/web" in keys and "derived/instance/a/web/web-1" in keys
    assert not [k for k in keys if "/b/" in k or k.startswith(("desired/role/", "desired/grant/",
                                                               "derived/firewall/"))], keys
    with cluster.client() as admin:  # the admin sees everything
        assert "desired/service/b/pay" in [r["key"] for r in get(admin, "events")["items"]]


@pytest.mark.parametrize("prefix", [
    "", "desired/service/b/", "observed/instance/b/", "derived/network/ip/b/", "secret/", "secret/a/",
    "auth/", "auth/token/", "audit/", "desired/role/", "derived/firewall/", "observed/node/",
])
def test_watch_of_what_the_caller_may_not_read_is_denied(two_tenants, prefix):
    _, ann = two_tenants
    assert watch_refused(ann, prefix).code() == grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize(("prefix", "sentinel"), [
    ("desired/", "desired/service/a/zz"), ("desired/service/", "desired/service/a/zz"),
    ("desired/secret/", "desired/secret/a/zz"), ("derived/", "derived/instance/a/web/web-zz"),
    ("derived/instance/a", "derived/instance/a/web/web-zz"), ("observed/", "observed/instance/a/web-zz"),
])
def test_a_wide_watch_streams_only_the_callers_tenant(two_tenants, prefix, sentinel):
    cluster, ann = two_tenants
    cluster.store.put("derived/instance/b/pay/pay-2", {"service": "b/pay"})  # live events too
    keys = watched(cluster, ann, prefix, sentinel)
    assert keys and keys[-1] == sentinel
    assert all(k.split("/")[2 if not k.startswith("derived/network/") else 3] == "a" for k in keys), keys
    assert not [k for k in keys if k.startswith(("desired/role/", "desired/grant/", "secret/", "auth/"))]


def test_the_admin_watches_everything(two_tenants):
    cluster, _ = two_tenants
    with cluster.client() as admin:
        keys = watched(cluster, admin, "")
    assert {"desired/service/b/pay", "desired/grant/ann-reads-a", "derived/firewall/n1"} <= set(keys)


def test_a_watch_is_cut_off_when_the_role_is_revoked(two_tenants, monkeypatch):
    cluster, ann = two_tenants
    monkeypatch.setattr(read_access, "TTL", 0.0)  # decide again at every event
    stream = ann.cluster.Watch(api_pb2.WatchRequest(prefix="desired/service/a/",
                                                    from_revision=cluster.store.revision()), timeout=20)
    cluster.store.put("desired/service/a/one", SERVICE)
    events = iter(stream)
    assert next(events).key == "desired/service/a/one"
    cluster.store.delete(GRANT_KEY)
    cluster.store.put("desired/service/a/two", SERVICE)
    with pytest.raises(grpc.RpcError) as err:
        next(events)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_explain_resolves_in_the_callers_tenant(two_tenants):
    _, ann = two_tenants
    denied(ann.json, "Explain", api_pb2.ExplainRequest(target="b/pay"))
    denied(ann.json, "Explain", api_pb2.ExplainRequest(target="pay"))  # the default tenant: not ann's
    with pytest.raises(ApiError) as err:  # `pay` in ann's tenant does not exist; b's is not named
        ann.json("Explain", api_pb2.ExplainRequest(target="pay", tenant="a"))
    assert err.value.code != grpc.StatusCode.PERMISSION_DENIED and "pay" in str(err.value)
    assert "services: a/web)" in str(err.value) and "b/pay" not in str(err.value)
    denied(ann.json, "ExplainNetwork", api_pb2.ExplainNetworkRequest(
        kind="connection", source="a/web", destination="b/pay:80", tenant="a"))
    denied(ann.json, "ExplainNetwork", api_pb2.ExplainNetworkRequest(
        kind="connection", source="b/pay", destination="a/web:80", tenant="a"))
    answer = ann.json("ExplainNetwork", api_pb2.ExplainNetworkRequest(
        kind="connection", source="a/web", destination="a/web:80", tenant="a"))
    assert json.dumps(answer)  # allowed within the tenant


def test_denials_are_audited(two_tenants):
    cluster, ann = two_tenants
    denied(get, ann, "services", "b")
    records = [f.value for f in cluster.store.range("audit/")[0]]
    assert any(r.get("verb") == "Get" and r.get("decision") == "denied" and "ann" in r.get("principal", "")
               for r in records), records


def test_top_of_every_tenant_shows_only_readable_ones(two_tenants):
    _, ann = two_tenants
    rows = ann.json("Top", api_pb2.GetRequest(kind="workloads", all_tenants=True))["items"]
    assert [r["service"] for r in rows] == ["a/web"]
    denied(ann.json, "Top", api_pb2.GetRequest(kind="workloads", tenant="b"))
    denied(ann.json, "Top", api_pb2.GetRequest(kind="nodes"))


def test_following_events_merges_the_three_roots_filtered(two_tenants):
    """`cca events --follow`: three filtered watches, not the admin's empty prefix."""
    cluster, ann = two_tenants
    events = ann.watch_state(from_revision=1)
    cluster.store.put("observed/instance/b/pay-7", {"node": "n1"})
    cluster.store.put("observed/instance/a/web-7", {"node": "n1"})
    keys, wanted = [], {"desired/service/a/web", "derived/instance/a/web/web-1", "observed/instance/a/web-7"}
    for event in events:  # the roots arrive interleaved: read until each has delivered
        keys.append(event["key"])
        if wanted <= set(keys):
            break
    events.close()
    assert not [k for k in keys if "/b/" in k or k.startswith(("desired/role/", "desired/grant/"))], keys


def test_explain_service_hides_sources_the_caller_may_not_read(two_tenants):
    """`explain service a/web` needs read on a/web only: a rule letting b/pay in must not name b/pay
    to a reader of tenant a (it is shown as a service the caller may not read)."""
    cluster, ann = two_tenants
    rule = {"kind": "network", "tenant": "a", "name": "0123456789abcdef", "source": "net.cca",
            "action": "allow", "from": "b/pay", "to": "a/web", "port": 80, "protocol": "tcp"}
    cluster.store.put("desired/network/a/0123456789abcdef", rule)
    answer = ann.json("ExplainNetwork", api_pb2.ExplainNetworkRequest(
        kind="service", destination="a/web", tenant="a"))
    assert "b/pay" not in json.dumps(answer), answer
    assert [t["from"] for t in answer["allowed"]] == ["(a service you may not read)"], answer
    with cluster.client() as admin:  # who may read both sees the name
        full = admin.json("ExplainNetwork", api_pb2.ExplainNetworkRequest(
            kind="service", destination="a/web", tenant="a"))
    assert [t["from"] for t in full["allowed"]] == ["b/pay"], full
