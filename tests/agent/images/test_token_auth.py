"""Pull from a real docker-registry configured for token auth: the registry answers 401 with a
Bearer challenge; a small token service (ES256 JWTs with an x5c chain the registry trusts) issues
tokens to `alice:secret` only."""

from __future__ import annotations

import base64
import datetime
import json
import secrets
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

from ccattler.agent.images.registry import Credentials, RegistryError, pull
from ccattler.agent.images.store import ImageStore

SERVICE, ISSUER = "cca-test-registry", "cca-test-issuer"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenService:
    """Signs registry tokens for the scopes asked, for the one user it knows."""

    def __init__(self, tmp_path: Path):
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cca test token signer")])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(hours=1))
                     .not_valid_after(now + datetime.timedelta(hours=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.bundle = tmp_path / "token-root.pem"
        self.bundle.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.requests: list[str] = []

    def token(self, scope: str) -> str:
        access = []
        for part in scope.split(" ") if scope else []:
            kind, name, actions = part.split(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        der = self.cert.public_bytes(serialization.Encoding.DER)
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(der).decode()]}
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": "alice", "aud": SERVICE, "exp": now + 300, "nbf": now - 10,
                  "iat": now, "jti": secrets.token_hex(8), "access": access}
        signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


@pytest.fixture
def token_service(tmp_path: Path) -> Iterator[tuple[TokenService, str]]:
    service = TokenService(tmp_path)
    expected = "Basic " + base64.b64encode(b"alice:secret").decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook
            from urllib.parse import parse_qs, urlparse

            service.requests.append(self.path)
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.end_headers()
                return
            scope = " ".join(parse_qs(urlparse(self.path).query).get("scope", []))
            body = json.dumps({"token": service.token(scope)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service, f"http://127.0.0.1:{server.server_address[1]}/token"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def registry_config(token_service) -> str:
    service, realm = token_service
    return (f"auth:\n  token:\n    realm: {realm}\n    service: {SERVICE}\n    issuer: {ISSUER}\n"
            f"    rootcertbundle: {service.bundle}\n")


def test_pull_answers_a_bearer_challenge(store: ImageStore, token_service, registry, tmp_path: Path) -> None:
    service, _ = token_service
    registry.push(f"oci:{store.layout}:busybox:latest", "tools/busybox:1.0", "--dest-creds", "alice:secret")
    service.requests.clear()
    image = pull(ImageStore(tmp_path / "fresh"), f"{registry.host}/tools/busybox:1.0",
                 credentials=Credentials("alice", "secret"))
    assert image.digest == store.resolve("busybox").digest
    assert any("scope=repository%3Atools%2Fbusybox%3Apull" in r for r in service.requests)
    with pytest.raises(RegistryError, match="token request to .* failed: HTTP Error 401"):
        pull(ImageStore(tmp_path / "anonymous"), f"{registry.host}/tools/busybox:1.0")
