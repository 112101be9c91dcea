"""Issue 12 class 8: wrong inputs get INVALID_ARGUMENT naming what is wrong (never UNKNOWN,
INTERNAL or UNAUTHENTICATED), on user and agent calls, and leave the store unchanged."""

from __future__ import annotations

import json

import grpc
import pytest

from ccattler.engine.api.client import ApiError
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from tests.engine.api.test_agent_calls import join


def changed_since(store, revision):
    return [f.key for f in store.range("")[0] if f.mod_revision > revision and not f.key.startswith("audit/")]


def refused(client, stub, method, request):
    with pytest.raises(ApiError) as err:
        client.unary(stub, method, request)
    return err.value


def call_raw(cluster, method, payload: bytes):
    """Send hand-made bytes as the request of ccattler.v1.Cluster/<method>."""
    with cluster.client() as client:
        rpc = client.channel.unary_unary(f"/ccattler.v1.Cluster/{method}",
                                          request_serializer=lambda b: b,
                                          response_deserializer=api_pb2.Json.FromString)
        with pytest.raises(grpc.RpcError) as err:
            rpc(payload, timeout=10)
    return err.value


def src(n):
    return [api_pb2.Source(path=f"{i:x}") for i in range(n)]  # small: the test server takes 1 MiB


@pytest.mark.parametrize(("method", "request_", "says"), [
    ("Apply", api_pb2.ApplyRequest(), "no source files"),
    ("Diff", api_pb2.ApplyRequest(), "no source files"),
    ("Apply", api_pb2.ApplyRequest(sources=src(100_000)), "at most 1000"),
    ("Apply", api_pb2.ApplyRequest(sources=[api_pb2.Source(path="a\x00.cca", text="")]), "NUL byte"),
    ("Apply", api_pb2.ApplyRequest(sources=src(1), files=[api_pb2.File(source="x", path="y")] * 1001),
     "ApplyRequest.files has 1001"),
    ("Delete", api_pb2.DeleteRequest(kind="service", name="a\x00b"), "NUL byte"),
    ("TokenCreate", api_pb2.TokenRequest(ttl_seconds=float("nan")), "finite"),
    ("TokenCreate", api_pb2.TokenRequest(ttl_seconds=float("inf")), "finite"),
    ("TokenCreate", api_pb2.TokenRequest(ttl_seconds=-5), "negative"),
    ("TokenCreate", api_pb2.TokenRequest(ttl_seconds=1e12), "out of range"),
    ("TokenCreate", api_pb2.TokenRequest(ttl_seconds=0.5), "out of range"),
    ("UserCreate", api_pb2.UserRequest(name="ann", groups=[f"g{i}" for i in range(1000)]), "at most 64"),
    ("MetricSet", api_pb2.MetricRequest(service="s", name="m", value=float("nan")), "finite"),
    ("MetricSet", api_pb2.MetricRequest(service="s", name="m", value=1e300), "outside"),
    ("Audit", api_pb2.AuditRequest(limit=-1), "negative"),
])
def test_wrong_user_inputs_are_invalid_argument_and_change_nothing(cluster, method, request_, says):
    revision = cluster.store.revision()
    with cluster.client() as client:
        error = refused(client, client.cluster, method, request_)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT, error
    assert says in str(error)
    assert changed_since(cluster.store, revision) == []
    with cluster.client() as client:  # still serving
        assert client.json("Health")["ok"]


def test_a_user_token_with_a_bad_lifetime_is_invalid_argument(cluster):
    with cluster.client() as client:
        client.json("UserCreate", api_pb2.UserRequest(name="ann"))
        for ttl in (-1.0, 1e15, float("nan")):
            request = api_pb2.UserRequest(name="ann", ttl_seconds=ttl)
            error = refused(client, client.cluster, "UserToken", request)
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT, (ttl, error)


@pytest.mark.parametrize("payload", [
    bytes([0xa8, 0x06, 0x01]),                         # field 101 (varint): unknown
    bytes([0xfa, 0x3e, 0x03]) + b"abc",                # field 1007 (bytes): unknown
    bytes([0xa8, 0x06, 0x01, 0xb0, 0x06, 0x02]),       # two unknown fields
])
def test_a_request_of_only_unknown_fields_is_invalid_argument(cluster, payload):
    error = call_raw(cluster, "Apply", payload)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "does not know" in error.details()


def test_negative_watch_revision_is_refused(cluster):
    with cluster.client() as client, pytest.raises(ApiError) as err:
        list(client.watch("desired/service/", from_revision=-3))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "negative" in str(err.value)


@pytest.mark.parametrize(("node_json", "says"), [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"a":' * 70 + "1" + "}" * 70, "nested too deeply"),
    ('{"cpu": NaN}', "not JSON"),
    ('{"cpu": Infinity}', "not JSON"),
    ('{"cpu": 1e999}', "out of range"),
    ("[1, 2]", "JSON object"),
])
def test_register_node_refuses_hostile_json(cluster, tmp_path, node_json, says):
    node, _ = join(cluster, tmp_path, "n1")
    revision = cluster.store.revision()
    with node:
        error = refused(node, node.agent, "RegisterNode", api_pb2.RegisterRequest(node_json=node_json))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT and says in str(error), error
        for ttl in (float("nan"), -1.0, 1e9):
            error = refused(node, node.agent, "RegisterNode",
                            api_pb2.RegisterRequest(node_json="{}", ttl_seconds=ttl))
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT, (ttl, error)
    assert changed_since(cluster.store, revision) == []


def test_agent_calls_are_capped(cluster, tmp_path):
    node, _ = join(cluster, tmp_path, "n1")
    with node:
        many = [api_pb2.Observation(key=f"observed/metric/default/s/m{i}/n1", value_json="{}")
                for i in range(10_001)]
        error = refused(node, node.agent, "Report", api_pb2.ReportRequest(observations=many))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT and "at most 10000" in str(error)
        error = refused(node, node.agent, "FetchSecrets", api_pb2.SecretsRequest(instances=["i"] * 1001))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        metric = json.dumps({"value": 1}).replace("1", "NaN")
        error = refused(node, node.agent, "Report", api_pb2.ReportRequest(observations=[
            api_pb2.Observation(key="observed/metric/default/s/cpu/n1", value_json=metric)]))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as err:
            list(node.agent.WatchSlice(api_pb2.WatchRequest(from_revision=-1), timeout=10))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
