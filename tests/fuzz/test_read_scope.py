"""Class 5 as a property: whatever prefix, kind or tenant a reader of tenant `a` asks Watch or Get
for, every key it is shown is one of tenant `a`'s; anything else is refused with a documented
status (tests/engine/api/test_read_authorization.py has the named cases)."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ccattler.engine.api.client import ApiError, Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from tests.engine.api.test_read_authorization import seed
from tests.fuzz.abuse import REFUSALS, examples

ROOTS = ["", "desired/", "derived/", "observed/", "secret/", "auth/", "audit/", "leader/", "intent/", "zz/"]
PARTS = ["service/", "secret/", "instance/", "placement/", "network/", "ip/", "role/", "grant/", "node/",
         "firewall/", "a/", "b/", "a", "b", "", "web", "pay", "*", "..", "%", "\x00"]


@pytest.fixture(scope="module")
def reader(server):
    seed(server.store)
    with server.client() as admin:
        admin.json("UserCreate", api_pb2.UserRequest(name="ann"))
        token = admin.unary(admin.cluster, "UserToken", api_pb2.UserRequest(name="ann")).token
    with Client(server.context(cert=None, key=None, token=token), timeout=10) as ann:
        yield ann


def tenant_a_only(key: str) -> bool:
    parts = key.split("/")
    index = 3 if key.startswith("derived/network/ip/") else 2
    return len(parts) > index and parts[index] == "a"


@examples(15)
@given(prefix=st.builds(lambda r, p: r + "".join(p), st.sampled_from(ROOTS), st.lists(st.sampled_from(PARTS),
                                                                                     max_size=3)))
def test_a_watch_shows_only_tenant_a(server, reader, prefix):
    stream = reader.cluster.Watch(api_pb2.WatchRequest(prefix=prefix, from_revision=1), timeout=0.4)
    keys = []
    try:
        for event in stream:
            keys.append(event.key)
    except grpc.RpcError as exc:
        assert exc.code() in REFUSALS | {grpc.StatusCode.DEADLINE_EXCEEDED}, (prefix, exc)
    assert all(tenant_a_only(k) for k in keys if k), (prefix, keys)


@examples(25)
@given(kind=st.sampled_from(["services", "instances", "secrets", "events", "nodes", "policies", "roles",
                             "grants", "gates", "networks", "tenant", "volumes", "connections", "bogus"]),
       tenant=st.sampled_from(["", "a", "b", "default", "a/b", "*"]), all_tenants=st.booleans(),
       name=st.sampled_from(["", "web", "pay", "b/pay", "a/web", "k"]))
def test_get_shows_only_tenant_a(reader, kind, tenant, all_tenants, name):
    request = api_pb2.GetRequest(kind=kind, tenant=tenant, all_tenants=all_tenants, name=name)
    try:
        rows = reader.json("Get", request)["items"]
    except ApiError as exc:
        assert exc.code in REFUSALS, exc
        return
    assert all(tenant_a_only(r["key"]) or (r["key"].startswith("secret/a/")) for r in rows), rows
