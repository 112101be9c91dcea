"""The cluster CA: certificates say who their holder is, CSRs keep keys local, foreign and expired
certificates are refused, and `cca init` material is laid out with private files."""

import datetime as dt
import stat

import pytest

from ccattler.engine.pki import (
    ADMIN_GROUP,
    NODE_LIFETIME,
    CertificateAuthority,
    PkiError,
    identity_of,
    init_cluster,
    make_csr,
    new_key,
)
from ccattler.engine.pki.ca import load_csr


@pytest.fixture(scope="module")
def ca():
    return CertificateAuthority.create()


def test_node_certificate_from_csr_names_the_node(ca):
    key = new_key()
    cert = ca.sign_csr(make_csr(key, "ignored"), name="n1", kind="node", lifetime=NODE_LIFETIME)
    ca.verify(cert)
    assert identity_of(cert).name == "n1" and identity_of(cert).kind == "node"
    assert cert.public_key() == key.public_key()
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert dt.timedelta(hours=24) <= lifetime <= dt.timedelta(hours=24, minutes=6)


def test_workload_certificate_carries_spiffe_id(ca):
    cert = ca.issue(new_key().public_key(), name="shop/web", kind="workload",
                    lifetime=dt.timedelta(hours=1), uris=("spiffe://ccattler/shop/web",))
    assert identity_of(cert).spiffe_id == "spiffe://ccattler/shop/web"


def test_foreign_certificate_is_refused(ca):
    other = CertificateAuthority.create()
    cert = other.issue(new_key().public_key(), name="evil", kind="admin", lifetime=dt.timedelta(hours=1))
    with pytest.raises(PkiError, match="not issued by this CA"):
        ca.verify(cert)


def test_expired_certificate_is_refused(ca):
    cert = ca.issue(new_key().public_key(), name="n1", kind="node", lifetime=dt.timedelta(seconds=1))
    with pytest.raises(PkiError, match="expired"):
        ca.verify(cert, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))


@pytest.mark.parametrize("pem", [b"", b"garbage", b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n"], ids=str)
def test_malformed_csr_is_a_clear_error(pem):
    with pytest.raises(PkiError, match="certificate signing request"):
        load_csr(pem)


def test_init_cluster_writes_private_keys_0600_and_refuses_twice(tmp_path):
    files = init_cluster(tmp_path / "c", "10.1.2.3:7443")
    for path in (files.ca_key, files.server_key, files.admin_key, files.master_key):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    ca = files.load_ca()
    from ccattler.engine.pki import load_cert

    admin = load_cert(files.admin_cert.read_bytes())
    ca.verify(admin)
    assert identity_of(admin).groups == (ADMIN_GROUP,)
    server = load_cert(files.server_cert.read_bytes())
    from cryptography import x509

    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "10.1.2.3" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    with pytest.raises(Exception, match="already exists"):
        init_cluster(tmp_path / "c", "10.1.2.3:7443")
