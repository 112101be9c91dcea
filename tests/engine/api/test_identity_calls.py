"""IssueIdentity over real mutual TLS: an X.509-SVID for an instance placed on the calling node,
refused (and audited) for one placed elsewhere, refused for a CSR asking for another or no SAN,
a clear error for a malformed CSR; the lifetime is the server's setting."""

from __future__ import annotations

import time

import grpc
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from ccattler.engine.api.client import ApiError
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.facts import CcaError
from ccattler.engine.pki import load_cert, make_csr, new_key
from ccattler.engine.pki.svid import identity_csr, svid_identity
from tests.engine.api.test_agent_calls import join

WEB = "spiffe://ccattler/shop/web"


def _place(cluster):
    cluster.store.txn((), [
        ("desired/service/shop/web", {"image": "busybox"}),
        ("derived/placement/shop/web-a1", {"service": "shop/web", "instance": "web-a1", "node": "n1"}),
        ("derived/placement/shop/web-b2", {"service": "shop/web", "instance": "web-b2", "node": "n2"}),
    ])


def _issue(client, instance, csr):
    return client.unary(client.agent, "IssueIdentity", api_pb2.IdentityRequest(instance=instance, csr=csr))


def _audit(cluster, method="IssueIdentity"):
    return [f.value for f in cluster.store.range("audit/")[0] if f.value.get("verb") == method]


def test_an_instance_on_the_node_gets_its_svid_for_the_node_made_key(cluster, tmp_path):
    _place(cluster)
    client, _ = join(cluster, tmp_path, "n1")
    key = new_key()
    with client:
        reply = _issue(client, "shop/web-a1", identity_csr(key, WEB))
    cert = load_cert(reply.cert)
    assert reply.spiffe_id == WEB and svid_identity(cert) == WEB
    assert cert.public_key() == key.public_key()  # signed for the node's key; no key came back
    assert load_cert(reply.bundle) == load_cert(cluster.files.ca_cert.read_bytes())
    assert 3590 < reply.expires - time.time() <= 3600  # 1 h by default
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert [(r["decision"], r["object"]) for r in _audit(cluster)] == [
        ("allowed", "identity of instance shop/web-a1")]


def test_an_instance_on_another_node_is_refused_and_audited(cluster, tmp_path):
    _place(cluster)
    client, _ = join(cluster, tmp_path, "n1")
    with client, pytest.raises(ApiError) as err:
        _issue(client, "shop/web-b2", identity_csr(new_key(), WEB))
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert "shop/web-b2 is not placed on node n1" in str(err.value)
    [record] = _audit(cluster)
    assert record["decision"] == "denied" and record["principal"] == "n1"
    assert record["object"] == "identity of instance shop/web-b2"


@pytest.mark.parametrize(("csr", "message"), [
    pytest.param(lambda: identity_csr(new_key(), "spiffe://ccattler/shop/db"),
                 "asks for spiffe://ccattler/shop/db; this instance's identity is " + WEB,
                 id="another-service"),
    pytest.param(lambda: make_csr(new_key(), "web"), "asks for no SAN", id="no-san"),
    pytest.param(lambda: b"-----BEGIN CERTIFICATE REQUEST-----\nnope\n-----END CERTIFICATE REQUEST-----\n",
                 "not a PEM certificate signing request", id="malformed"),
    pytest.param(lambda: b"", "carries no CSR", id="empty"),
])
def test_a_csr_for_anything_but_the_instance_identity_is_refused(cluster, tmp_path, csr, message):
    _place(cluster)
    client, _ = join(cluster, tmp_path, "n1")
    with client, pytest.raises(ApiError) as err:
        _issue(client, "shop/web-a1", csr())
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "identity of shop/web-a1" in str(err.value) and message in str(err.value)


def test_a_csr_asking_for_an_extra_san_is_refused(cluster, tmp_path):
    from cryptography.hazmat.primitives import hashes, serialization

    _place(cluster)
    key = new_key()
    csr = (x509.CertificateSigningRequestBuilder().subject_name(x509.Name([]))
           .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(WEB),
                                                       x509.DNSName("admin.example")]), critical=False)
           .sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    client, _ = join(cluster, tmp_path, "n1")
    with client, pytest.raises(ApiError) as err:
        _issue(client, "shop/web-a1", csr)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "DNSName admin.example" in str(err.value)


def test_only_nodes_ask_for_identities(cluster):
    _place(cluster)
    with cluster.client() as admin, pytest.raises(ApiError) as err:  # the admin certificate
        _issue(admin, "shop/web-a1", identity_csr(new_key(), WEB))
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED and "node certificate" in str(err.value)


def test_the_lifetime_is_the_servers_setting(make_cluster, tmp_path):
    cluster = make_cluster(identity_ttl=30)
    _place(cluster)
    client, _ = join(cluster, tmp_path, "n1")
    with client:
        reply = _issue(client, "shop/web-a1", identity_csr(new_key(), WEB))
    assert 25 < reply.expires - time.time() <= 30


def test_a_lifetime_out_of_range_is_refused(make_cluster):
    with pytest.raises(CcaError, match="identity TTL 1s: must be between 10s and 86400s"):
        make_cluster(identity_ttl=1)
