"""The server speaks only TLS with verified identities: plaintext, foreign-CA, expired and
certificate-less clients are refused; malformed and oversized requests get clear statuses."""

from __future__ import annotations

import datetime as dt

import grpc
import pytest

from ccattler.engine.api.client import ApiError, Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.pki import CertificateAuthority, cert_pem, key_pem, new_key


def _write_identity(tmp_path, ca, name, lifetime=dt.timedelta(hours=1), kind="admin"):
    key = new_key()
    cert = ca.issue(key.public_key(), name=name, kind=kind, lifetime=lifetime)
    (tmp_path / f"{name}.crt").write_bytes(cert_pem(cert))
    (tmp_path / f"{name}.key").write_bytes(key_pem(key))
    return str(tmp_path / f"{name}.crt"), str(tmp_path / f"{name}.key")


def test_health_over_mutual_tls(cluster):
    with cluster.client() as client:
        assert client.json("Health")["ok"] is True


def test_plaintext_client_is_refused(cluster):
    channel = grpc.insecure_channel(cluster.server.listen)
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary("/ccattler.v1.Cluster/Health")(b"", timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    channel = grpc.insecure_channel(cluster.server.token_listen)
    with pytest.raises(grpc.RpcError):
        channel.unary_unary("/ccattler.v1.Cluster/Health")(b"", timeout=5)


def test_foreign_ca_client_certificate_is_refused(cluster, tmp_path):
    cert, key = _write_identity(tmp_path, CertificateAuthority.create(), "evil")
    with cluster.client(cert=cert, key=key) as client, pytest.raises(ApiError) as err:
        client.json("Health")
    assert err.value.code == grpc.StatusCode.UNAVAILABLE
    assert cluster.server.listen in str(err.value) and cert in str(err.value)


def test_expired_client_certificate_is_refused_with_its_path(cluster, tmp_path):
    cert, key = _write_identity(tmp_path, cluster.files.load_ca(), "old", lifetime=dt.timedelta(seconds=-1))
    with pytest.raises(Exception, match=f"client certificate {cert} expired"):
        cluster.client(cert=cert, key=key)


def test_server_with_another_ca_is_not_trusted(cluster, tmp_path):
    other = tmp_path / "other-ca.crt"
    other.write_bytes(cert_pem(CertificateAuthority.create().cert))
    with cluster.client(ca=str(other)) as client, pytest.raises(ApiError, match="cannot reach"):
        client.json("Health")


def test_token_listener_needs_a_bearer_token(cluster):
    with Client(cluster.context(cert=None, key=None), timeout=10) as client:
        assert client.json("Health")["ok"]  # health is public
        with pytest.raises(ApiError) as err:
            client.json("Status")
    assert err.value.code == grpc.StatusCode.UNAUTHENTICATED and "bearer token" in str(err.value)
    bad_token = cluster.context(cert=None, key=None, token="cca.0123456789ab." + "x" * 40)
    with Client(bad_token) as client, pytest.raises(ApiError) as err:
        client.json("Status")
    assert err.value.code == grpc.StatusCode.UNAUTHENTICATED and "unknown" in str(err.value)
    assert any(r.value["decision"] == "denied" for r in cluster.store.range("audit/")[0])


def test_malformed_protobuf_is_invalid_argument_and_changes_nothing(cluster):
    revision = cluster.store.revision()
    with cluster.client() as client:
        call = client.channel.unary_unary("/ccattler.v1.Cluster/SecretSet")
        with pytest.raises(grpc.RpcError) as err:
            call(b"\x0a\xff\xff\xff\xff\x0f", timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "malformed SecretRequest" in err.value.details()
    assert cluster.store.range("secret/")[0] == []
    assert all(f.key.startswith("audit/") for f in cluster.store.range("")[0] if f.mod_revision > revision)


def test_oversized_request_is_refused_and_changes_nothing(cluster):
    with cluster.client() as client, pytest.raises(ApiError) as err:
        client.json("SecretSet", api_pb2.SecretRequest(name="big", value=b"x" * (2 * 1024 * 1024)))
    assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert cluster.store.range("secret/")[0] == []


def test_metrics_and_healthz(cluster):
    import urllib.request

    with cluster.client() as client:
        client.json("Health")
    base = f"http://{cluster.server.metrics_listen}"
    assert urllib.request.urlopen(f"{base}/healthz", timeout=5).read() == b"ok\n"
    text = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
    assert 'cca_api_requests_total{code="OK",method="Health"}' in text


def test_rate_limit_is_resource_exhausted(make_cluster):
    c = make_cluster(rate=0.01, burst=2, metrics_listen=None)
    codes = []
    with c.client() as client:
        for _ in range(4):
            try:
                client.json("Health")
                codes.append("ok")
            except ApiError as exc:
                codes.append(exc.code)
    assert codes == ["ok", "ok", grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.RESOURCE_EXHAUSTED]


def test_failed_logins_are_rate_limited_per_host_and_audited_only_up_to_the_limit(make_cluster):
    c = make_cluster(auth_failure_rate=0.01, auth_failure_burst=3, metrics_listen=None)
    bad = c.context(cert=None, key=None, token="cca.0123456789ab." + "y" * 40)
    codes = []
    with Client(bad) as client:
        for _ in range(6):
            try:
                client.json("Status")
            except ApiError as exc:
                codes.append(exc.code)
    assert codes[:3] == [grpc.StatusCode.UNAUTHENTICATED] * 3
    assert codes[3:] == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 3
    assert len(c.store.range("audit/")[0]) == 3


def test_server_refuses_an_expired_certificate_even_if_the_client_sends_it(cluster, tmp_path):
    cert, key = _write_identity(tmp_path, cluster.files.load_ca(), "old", lifetime=dt.timedelta(seconds=-1))
    from pathlib import Path

    credentials = grpc.ssl_channel_credentials(cluster.files.ca_cert.read_bytes(), Path(key).read_bytes(),
                                               Path(cert).read_bytes())
    channel = grpc.secure_channel(cluster.server.listen, credentials)
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary("/ccattler.v1.Cluster/Status")(b"", timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    channel.close()


def test_audit_log_keeps_the_newest_records(cluster):
    from ccattler.engine.api.audit import AuditLog, AuditRecord

    log = AuditLog(cluster.store, keep=5, prune_every=4)
    for i in range(12):
        log.record(AuditRecord(f"r{i:02d}", 1000.0 + i, "admin", "Apply", "x", "allowed"))
    kept = [f.value["request_id"] for f in cluster.store.range("audit/")[0]]
    assert kept[-1] == "r11" and "r00" not in kept and len(kept) <= 5 + 3


def test_a_certificate_that_expires_on_an_open_channel_stops_working(cluster, tmp_path):
    import time

    cert, key = _write_identity(tmp_path, cluster.files.load_ca(), "brief", lifetime=dt.timedelta(seconds=2))
    with cluster.client(cert=cert, key=key) as client:
        assert client.json("Status")["revision"] >= 0
        time.sleep(2.5)
        with pytest.raises(ApiError) as err:
            client.json("Status")
    assert err.value.code == grpc.StatusCode.UNAUTHENTICATED and "expired" in str(err.value)
