"""Pull over HTTPS from docker-registry serving a certificate signed by a CA given with `ca_file`."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ccattler.agent.images.registry import RegistryError, pull
from ccattler.agent.images.store import ImageStore


def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


@pytest.fixture
def tls_files(tmp_path: Path) -> dict[str, Path]:
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(hours=1)
    ca = (x509.CertificateBuilder().subject_name(_name("test CA")).issuer_name(_name("test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(_name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    files = {"ca": tmp_path / "ca.pem", "cert": tmp_path / "registry.pem", "key": tmp_path / "registry.key"}
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return files


@pytest.fixture
def registry_config(tls_files: dict[str, Path]) -> str:
    return f"  tls:\n    certificate: {tls_files['cert']}\n    key: {tls_files['key']}\n"


def test_pull_over_https_verifies_the_registry(store: ImageStore, registry, tls_files, tmp_path: Path) \
        -> None:
    registry.push(f"oci:{store.layout}:busybox:latest", "tools/busybox:1.0")
    reference = f"{registry.host}/tools/busybox:1.0"
    image = pull(ImageStore(tmp_path / "fresh"), reference, ca_file=str(tls_files["ca"]))
    assert image.digest == store.resolve("busybox").digest
    with pytest.raises(RegistryError, match="CERTIFICATE_VERIFY_FAILED"):  # not trusted: no silent http
        pull(ImageStore(tmp_path / "untrusted"), reference)
