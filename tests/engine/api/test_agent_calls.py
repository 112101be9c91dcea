"""Agent-facing calls over real mutual TLS: join with a single-use token and a CSR, register and
heartbeat under a store lease, report only the node's own state, fetch only granted secrets."""

from __future__ import annotations

import json
import time

import grpc
import pytest

from ccattler.engine.api.agent_client import AgentClient
from ccattler.engine.api.client import ApiError, Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.auth import create_token
from ccattler.engine.facts import CcaError
from ccattler.engine.pki import identity_of, key_pem, load_cert, make_csr, new_key
from ccattler.engine.secrets import LocalKeyProvider, set_secret


def join(cluster, tmp_path, node, token=None):
    token = token or create_token(cluster.store, "join", 60)[0]
    key = new_key()
    with Client(cluster.context(cert=None, key=None), anonymous=True) as anon:
        request = api_pb2.JoinRequest(token=token, node=node, csr=make_csr(key, node))
        reply = anon.unary(anon.agent, "Join", request)
    (tmp_path / f"{node}.crt").write_bytes(reply.cert)
    (tmp_path / f"{node}.key").write_bytes(key_pem(key))
    return cluster.client(cert=str(tmp_path / f"{node}.crt"), key=str(tmp_path / f"{node}.key")), token


def test_join_issues_a_24h_node_certificate_and_the_token_works_once(cluster, tmp_path):
    client, token = join(cluster, tmp_path, "n1")
    cert = load_cert((tmp_path / "n1.crt").read_bytes())
    assert identity_of(cert).kind == "node" and identity_of(cert).name == "n1"
    assert 23.9 < (cert.not_valid_after_utc.timestamp() - time.time()) / 3600 <= 24.0
    revision = cluster.store.revision()
    with pytest.raises(ApiError) as err:
        join(cluster, tmp_path, "n2", token)
    assert err.value.code == grpc.StatusCode.UNAUTHENTICATED and "already used" in str(err.value)
    assert [f.key for f in cluster.store.range("")[0] if f.mod_revision > revision
            and not f.key.startswith("audit/")] == []
    client.close()


def test_join_with_a_malformed_csr_keeps_the_token(cluster):
    token, _ = create_token(cluster.store, "join", 60)
    with Client(cluster.context(cert=None, key=None), anonymous=True) as anon, pytest.raises(ApiError) as err:
        anon.unary(anon.agent, "Join", api_pb2.JoinRequest(token=token, node="n1", csr=b"nope"))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert len(cluster.store.range("auth/token/")[0]) == 1


def test_register_heartbeat_and_lease_expiry(cluster, tmp_path):
    client, _ = join(cluster, tmp_path, "n1")
    with client:
        lease = client.unary(client.agent, "RegisterNode", api_pb2.RegisterRequest(
            node_json=json.dumps({"capacity": {"cpu": 2000, "memory": 1 << 30}}), ttl_seconds=3))
        replies = list(client.agent.Heartbeat(iter([api_pb2.HeartbeatRequest(lease=lease.lease)] * 3)))
        assert len(replies) == 3
        assert cluster.store.get("observed/node/n1").lease == lease.lease
        with pytest.raises(grpc.RpcError) as err:
            list(client.agent.Heartbeat(iter([api_pb2.HeartbeatRequest(lease=lease.lease + 999)])))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    deadline = time.time() + 10
    while cluster.store.get("observed/node/n1") is not None and time.time() < deadline:
        time.sleep(0.2)
    assert cluster.store.get("observed/node/n1") is None  # the stream stopped: the lease ran out


@pytest.mark.parametrize("key,value", [
    pytest.param("observed/instance/default/web-abc", {"node": "n2", "state": "running"}, id="other-node"),
    pytest.param("observed/node/n2", {"capacity": {}}, id="other-node-doc"),
    pytest.param("desired/service/default/web", {"image": "x"}, id="desired"),
    pytest.param("observed/metric/web/rps/n2", {"value": 1}, id="other-source-metric"),
])
def test_reporting_state_that_is_not_the_nodes_own_is_refused(cluster, tmp_path, key, value):
    client, _ = join(cluster, tmp_path, "n1")
    revision = cluster.store.revision()
    cluster.store.put("derived/placement/default/web-own", {"service": "default/web", "node": "n1"})
    own = api_pb2.Observation(key="observed/instance/default/web-own", value_json=json.dumps({"node": "n1"}))
    other = api_pb2.Observation(key=key, value_json=json.dumps(value))
    with client, pytest.raises(ApiError) as err:
        client.unary(client.agent, "Report", api_pb2.ReportRequest(observations=[own, other]))
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED and "n1" in str(err.value)
    assert [f.key for f in cluster.store.range("observed/")[0] if f.mod_revision > revision] == []


def test_reporting_own_instances_and_metrics(cluster, tmp_path):
    client, _ = join(cluster, tmp_path, "n1")
    cluster.store.put("derived/placement/default/web-x1", {"service": "default/web", "instance": "web-x1",
                                                          "node": "n1"})
    cluster.store.put("desired/service/default/web", {"kind": "service", "tenant": "default", "name": "web"})
    with client:
        client.unary(client.agent, "Report", api_pb2.ReportRequest(observations=[
            api_pb2.Observation(key="observed/instance/default/web-x1",
                                value_json=json.dumps({"node": "n1", "state": "running"})),
            api_pb2.Observation(key="observed/metric/default/web/rps/n1",
                                value_json=json.dumps({"value": 3})),
        ]))
    assert cluster.store.get("observed/instance/default/web-x1").value["state"] == "running"


def test_fetch_secrets_only_for_instances_on_the_node(cluster, tmp_path):
    keys = LocalKeyProvider.from_file(cluster.files.master_key)
    set_secret(cluster.store, keys, "db.password", "shop", b"s3cret")
    cluster.store.txn((), [
        ("desired/service/shop/web", {"secrets": [{"name": "shop/db.password", "mount": "/run/secrets/db"}]}),
        ("derived/placement/shop/web-a1", {"service": "shop/web", "instance": "web-a1", "node": "n1"}),
        ("derived/placement/shop/web-b2", {"service": "shop/web", "instance": "web-b2", "node": "n2"}),
    ])
    client, _ = join(cluster, tmp_path, "n1")
    with client:
        got = client.unary(client.agent, "FetchSecrets", api_pb2.SecretsRequest(instance="shop/web-a1"))
        assert [(s.name, s.value, s.mount) for s in got.secrets] == [("shop/db.password", b"s3cret",
                                                                      "/run/secrets/db")]
        with pytest.raises(ApiError) as err:
            client.unary(client.agent, "FetchSecrets", api_pb2.SecretsRequest(instance="shop/web-b2"))
        assert err.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_fetch_secrets_for_several_instances_in_one_call(cluster, tmp_path):
    keys = LocalKeyProvider.from_file(cluster.files.master_key)
    set_secret(cluster.store, keys, "db.password", "shop", b"s3cret")
    cluster.store.txn((), [
        ("desired/service/shop/web", {"secrets": [{"name": "shop/db.password", "mount": "/run/secrets/db"}]}),
        ("desired/service/shop/api", {"secrets": [{"name": "shop/api.key"}]}),  # never set
        ("derived/placement/shop/web-a1", {"service": "shop/web", "instance": "web-a1", "node": "n1"}),
        ("derived/placement/shop/web-c3", {"service": "shop/web", "instance": "web-c3", "node": "n1"}),
        ("derived/placement/shop/api-d4", {"service": "shop/api", "instance": "api-d4", "node": "n1"}),
        ("derived/placement/shop/web-b2", {"service": "shop/web", "instance": "web-b2", "node": "n2"}),
    ])
    client, _ = join(cluster, tmp_path, "n1")
    asked = ["shop/web-a1", "shop/web-b2", "shop/web-c3", "shop/api-d4", "nonsense"]
    with client:
        got = client.unary(client.agent, "FetchSecrets", api_pb2.SecretsRequest(instances=asked))
        assert [a.instance for a in got.instances] == asked and not got.secrets
        by = {a.instance: a for a in got.instances}
        for ok in ("shop/web-a1", "shop/web-c3"):
            assert [(s.name, s.value, s.mount) for s in by[ok].secrets] == [("shop/db.password", b"s3cret",
                                                                            "/run/secrets/db")]
            assert by[ok].error == ""
        assert "not placed on node n1" in by["shop/web-b2"].error and not by["shop/web-b2"].secrets
        assert "has no value yet" in by["shop/api-d4"].error
        assert by["nonsense"].error

        # The client: one call, each instance → its values or its error.
        agent = AgentClient(client)
        many = agent.fetch_secrets_many(asked[:3])
        assert many["shop/web-a1"] == [("shop/db.password", b"s3cret", "/run/secrets/db")]
        assert isinstance(many["shop/web-b2"], CcaError) and "not placed" in str(many["shop/web-b2"])

        with pytest.raises(ApiError) as err:
            too_many = api_pb2.SecretsRequest(instances=["shop/web-a1"] * 1001)
            client.unary(client.agent, "FetchSecrets", too_many)
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "at most 1000" in str(err.value)


class OldServer:
    """A client whose server predates batched FetchSecrets: it parses only `instance`."""

    agent = object()

    def __init__(self) -> None:
        self.calls: list[str] = []

    def unary(self, stub, method, request):
        self.calls.append(request.instance)
        if not request.instance:
            raise ApiError("instance name '': empty", grpc.StatusCode.INVALID_ARGUMENT)
        if request.instance.endswith("b2"):
            raise ApiError("not placed here", grpc.StatusCode.PERMISSION_DENIED)
        return api_pb2.Secrets(secrets=[api_pb2.SecretValue(name="t", value=b"v", mount="")])


def test_fetch_secrets_many_falls_back_to_one_call_each_on_an_old_server():
    old = OldServer()
    many = AgentClient(old).fetch_secrets_many(["shop/web-a1", "shop/web-b2"])
    assert old.calls == ["", "shop/web-a1", "shop/web-b2"]
    assert many["shop/web-a1"] == [("t", b"v", "")] and isinstance(many["shop/web-b2"], CcaError)


def test_admin_cannot_call_agent_methods(cluster):
    with cluster.client() as client, pytest.raises(ApiError) as err:
        client.unary(client.agent, "Report", api_pb2.ReportRequest())
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_watch_slice_shows_only_the_nodes_placements(cluster, tmp_path):
    cluster.store.txn((), [
        ("derived/placement/shop/web-a1", {"service": "shop/web", "node": "n1"}),
        ("derived/placement/shop/web-b2", {"service": "shop/web", "node": "n2"}),
        ("derived/firewall/n2", {"rules": []}),
        ("derived/network/ip/shop/web-a1", {"ip": "10.88.1.5", "node": "n1"}),
        ("derived/network/ip/shop/web-b2", {"ip": "10.88.2.5", "node": "n2"}),
    ])
    client, _ = join(cluster, tmp_path, "n1")
    with client:
        stream = client.agent.WatchSlice(api_pb2.WatchRequest(from_revision=0))
        seen = []
        for event in (e for message in stream for e in (message.events if message.kind == "batch"
                                                          else (message,))):
            seen.append((event.kind, event.key))
            if event.kind == "synced":
                cluster.store.put("derived/placement/shop/web-c3", {"service": "shop/web", "node": "n1"})
            if event.key == "derived/placement/shop/web-c3":
                stream.cancel()
                break
    keys = [k for _, k in seen]
    assert "derived/placement/shop/web-a1" in keys and "derived/placement/shop/web-c3" in keys
    assert "derived/placement/shop/web-b2" not in keys and "derived/firewall/n2" not in keys
    assert "derived/network/ip/shop/web-a1" in keys and "derived/network/ip/shop/web-b2" not in keys
    assert not any(k.startswith(("secret/", "auth/")) for k in keys)


def test_enrol_with_join_cluster_then_renew_with_a_fresh_key(cluster, tmp_path):
    from ccattler.engine.api.enroll import join_cluster, needs_renewal, renew_certificate

    token, _ = create_token(cluster.store, "join", 60)
    context = join_cluster(cluster.server.listen, token, cluster.files.ca_cert, "n7", tmp_path / "node", "n",
                           token_server=cluster.server.token_listen)
    first_key = (tmp_path / "node" / "n7.key").read_bytes()
    assert not needs_renewal(context)
    renew_certificate(context)
    assert (tmp_path / "node" / "n7.key").read_bytes() != first_key
    cert = load_cert((tmp_path / "node" / "n7.crt").read_bytes())
    assert identity_of(cert).name == "n7" and identity_of(cert).kind == "node"
    with Client(context) as client:
        lease = client.unary(client.agent, "RegisterNode", api_pb2.RegisterRequest(node_json="{}"))
    assert lease.lease and cluster.store.get("observed/node/n7") is not None


def test_agent_client_heartbeat_keeps_the_node_until_stopped(cluster, tmp_path):
    from ccattler.engine.api.agent_client import AgentClient

    client, _ = join(cluster, tmp_path, "n1")
    with client:
        agent = AgentClient(client)
        lease = agent.register({"capacity": {"cpu": 1000, "memory": 1 << 30}}, ttl=3)
        beat = agent.heartbeat(lease, interval=0.5)
        time.sleep(4.5)  # longer than the TTL: only the heartbeats keep it
        assert beat.alive and beat.error is None and beat.revision > 0
        metrics = cluster.server.metrics
        # Nine beats on one stream: one call, still open, none ended.
        assert metrics.streams.labels("Heartbeat")._value.get() == 1
        assert metrics.requests.labels("Heartbeat", "OK")._value.get() == 0
        assert cluster.store.get("observed/node/n1") is not None
        cluster.store.put("derived/placement/default/web-a", {"service": "default/web", "node": "n1"})
        assert agent.report({"observed/instance/default/web-a": {"node": "n1", "state": "running"}}) > 0
        stopping = time.monotonic()
        beat.stop()
        assert time.monotonic() - stopping < 1.0 and not beat.alive and beat.error is None
    deadline = time.time() + 10
    while cluster.store.get("observed/node/n1") is not None and time.time() < deadline:
        time.sleep(0.2)
    assert cluster.store.get("observed/node/n1") is None


def test_a_heartbeat_survives_its_stream_breaking(cluster, tmp_path):
    """A stream the server ends (a server lost, a restart) is opened again within the lease: the
    node keeps its lease and registers nothing new."""
    from ccattler.engine.api.agent_client import AgentClient

    client, _ = join(cluster, tmp_path, "n1")
    with client:
        agent = AgentClient(client)
        lease = agent.register({"capacity": {"cpu": 1000, "memory": 1 << 30}}, ttl=3)
        beat = agent.heartbeat(lease, interval=0.5)
        time.sleep(1.2)
        beat._call.cancel()  # the stream breaks under the beats (CANCELLED, as a stopping server does)
        time.sleep(4)  # longer than the TTL
        assert beat.alive and beat.error is None
        assert cluster.store.get("observed/node/n1").lease == lease
        beat.stop()


def test_join_cannot_take_over_a_live_nodes_name(cluster, tmp_path):
    client, _ = join(cluster, tmp_path, "n1")
    with client:
        client.unary(client.agent, "RegisterNode", api_pb2.RegisterRequest(node_json="{}", ttl_seconds=30))
    token, _ = create_token(cluster.store, "join", 60)
    with pytest.raises(ApiError) as err:
        join(cluster, tmp_path / "other", "n1", token)
    assert err.value.code == grpc.StatusCode.ABORTED and "alive" in str(err.value)
    assert len(cluster.store.range("auth/token/")[0]) == 1  # the token was not spent


def test_re_registering_moves_the_node_to_a_new_lease(cluster, tmp_path):
    client, _ = join(cluster, tmp_path, "n1")
    with client:
        first = client.unary(client.agent, "RegisterNode", api_pb2.RegisterRequest(node_json="{}"))
        second = client.unary(client.agent, "RegisterNode", api_pb2.RegisterRequest(node_json='{"a": 1}'))
        assert first.lease != second.lease
        fact = cluster.store.get("observed/node/n1")
        assert fact.lease == second.lease and fact.value == {"a": 1}
        with pytest.raises(grpc.RpcError) as err:
            list(client.agent.Heartbeat(iter([api_pb2.HeartbeatRequest(lease=first.lease)])))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


def register(client, doc, ttl):
    return client.unary(client.agent, "RegisterNode", api_pb2.RegisterRequest(node_json=doc, ttl_seconds=ttl))


def _writes_since(store, revision):
    """Keys written after `revision`, audit records aside (the store's revision counts every txn)."""
    return [f.key for f in store.range("")[0] if f.mod_revision > revision and not f.key.startswith("audit/")]


def test_re_registering_an_unchanged_node_keeps_its_lease_and_writes_nothing(cluster, tmp_path):
    client, _ = join(cluster, tmp_path, "n1")
    doc = json.dumps({"address": "192.0.2.7"})
    with client:
        first = register(client, doc, 30)
        revision = cluster.store.revision()
        again = register(client, doc, 30)
        assert again.lease == first.lease and cluster.store.revision() == revision  # no write at all
        # A heartbeat renews the lease and writes nothing either.
        replies = list(client.agent.Heartbeat(iter([api_pb2.HeartbeatRequest(lease=first.lease)] * 2)))
        assert len(replies) == 2 and _writes_since(cluster.store, revision) == []
        assert cluster.store.revision() == revision
        # Another TTL is another lease (and one write).
        other = register(client, doc, 20)
        assert other.lease != first.lease and cluster.store.get("observed/node/n1").lease == other.lease


def test_re_registering_after_the_lease_expired_registers_anew(cluster, tmp_path):
    client, _ = join(cluster, tmp_path, "n1")
    with client:
        first = register(client, "{}", 3)
        deadline = time.time() + 10  # no heartbeat: the lease runs out within its TTL
        while cluster.store.get("observed/node/n1") is not None and time.time() < deadline:
            time.sleep(0.2)
        assert cluster.store.get("observed/node/n1") is None
        again = register(client, "{}", 3)
        assert again.lease != first.lease and cluster.store.get("observed/node/n1").lease == again.lease


def test_beats_on_one_stream_meet_the_rate_limit_each(make_cluster, tmp_path):
    """A stream carries many beats; each is a request against the node's rate, as a call was."""
    cluster = make_cluster(rate=0.01, burst=3)
    client, _ = join(cluster, tmp_path, "n1")
    with client:
        lease = client.unary(client.agent, "RegisterNode", api_pb2.RegisterRequest(node_json="{}")).lease
        beats = [api_pb2.HeartbeatRequest(lease=lease)] * 5
        replies = []
        with pytest.raises(grpc.RpcError) as err:
            for reply in client.agent.Heartbeat(iter(beats)):
                replies.append(reply)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # Of the burst of 3: the registration, then the call with its first beat, the second beat.
    assert len(replies) == 2
