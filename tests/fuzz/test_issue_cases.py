"""The cases issue 12 lists, each against the same long-lived server: the documented status, the
store unchanged, the server still serving. (Each class has its own tests too; this keeps the
catalogue in one place, beside the fuzzers.)"""

from __future__ import annotations

import json

import grpc
import pytest

from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from tests.engine.api.test_agent_calls import join
from tests.fuzz.abuse import assert_alive, outcome_is_clean, raw_unary, state

INVALID, DENIED = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED


def source(text: str) -> api_pb2.ApplyRequest:
    return api_pb2.ApplyRequest(sources=[api_pb2.Source(path="case.cca", text=text)])


CLUSTER_CASES = [
    pytest.param("PolicyApply", api_pb2.PolicyRequest(name="p", text="é"), INVALID, id="1-one-byte-policy"),
    pytest.param("Apply", source("service big { image a:1  instances 1000000000 }\n"), INVALID,
                 id="3-a-billion-instances"),
    pytest.param("Apply", source("".join(f"service t{i} {{ image a:1 }}\n" for i in range(30_000))), INVALID,
                 id="3-30000-services"),
    pytest.param("Apply", source("service t { image a:1 }\né\n" * 30_000), INVALID,
                 id="30000-errors-in-one-message"),
    pytest.param("Apply", api_pb2.ApplyRequest(), INVALID, id="4-8-empty-apply"),
    pytest.param("Apply", b"\xa8\x06\x01", INVALID, id="8-only-unknown-fields"),
    pytest.param("Apply", api_pb2.ApplyRequest(sources=[api_pb2.Source(path="a\x00.cca")]), INVALID,
                 id="8-nul-in-path"),
    pytest.param("TokenCreate", api_pb2.TokenRequest(ttl_seconds=float("nan")), INVALID, id="8-nan-ttl"),
    pytest.param("UserToken", api_pb2.UserRequest(name="nobody", ttl_seconds=-1), INVALID,
                 id="8-bad-lifetime"),
    pytest.param("UserCreate", api_pb2.UserRequest(name="g", groups=[f"g{i}" for i in range(1000)]), INVALID,
                 id="8-absurd-group-count"),
]


@pytest.mark.parametrize(("method", "request_", "code"), CLUSTER_CASES)
def test_issue_cases(server, admin, method, request_, code):
    payload = request_ if isinstance(request_, bytes) else request_.SerializeToString()
    before = state(server.store)
    reply = raw_unary(admin.channel, "Cluster", method, payload, timeout=60)
    assert not outcome_is_clean(reply, server.store, before, method), f"{method} was accepted"
    assert reply.code() == code, (reply.code(), reply.details())
    assert len(reply.details().encode()) <= 8 * 1024  # fits the client's header limit, says what was cut
    assert_alive(admin.channel)


def test_negative_watch_revision_is_invalid(server, admin):
    stream = admin.cluster.Watch(api_pb2.WatchRequest(prefix="desired/", from_revision=-5), timeout=10)
    with pytest.raises(grpc.RpcError) as err:
        next(iter(stream))
    assert err.value.code() == INVALID
    assert_alive(admin.channel)


@pytest.fixture(scope="module")
def node(server, tmp_path_factory):
    client, _ = join(server, tmp_path_factory.mktemp("node"), "fzi")
    with client:
        yield client


def deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize(("method", "request_", "code"), [
    pytest.param("RegisterNode", api_pb2.RegisterRequest(node_json='{"a": ' + deep(100_000) + "}"), INVALID,
                 id="8-deeply-nested-json"),
    pytest.param("RegisterNode", api_pb2.RegisterRequest(node_json="{}", ttl_seconds=float("inf")), INVALID,
                 id="8-infinite-lease"),
    pytest.param("Report", api_pb2.ReportRequest(observations=[api_pb2.Observation(
        key="observed/instance/default/web-zz", value_json=json.dumps({"node": "fzi"}))]), DENIED,
                 id="5-report-an-instance-placed-nowhere"),
    pytest.param("Report", api_pb2.ReportRequest(observations=[api_pb2.Observation(
        key="observed/node/other", value_json="{}")]), DENIED, id="5-report-another-node"),
])
def test_agent_issue_cases(server, node, method, request_, code):
    before = state(server.store)
    reply = raw_unary(node.channel, "Agent", method, request_.SerializeToString(), timeout=30)
    assert not outcome_is_clean(reply, server.store, before, method), f"{method} was accepted"
    assert reply.code() == code, (reply.code(), reply.details())
    assert_alive(node.channel)
