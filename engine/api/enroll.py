"""Client-side enrolment of a node: join with a token (the private key is made here and never sent)
and renew the node certificate before it expires (`RENEW_BEFORE`), writing key and cert 0600/0644."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import replace
from pathlib import Path

from ccattler.engine.api.client import Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.clientconfig import Context, token_address
from ccattler.engine.pki import key_pem, load_cert, make_csr, new_key

#: Renew when less than this much of the certificate's life is left.
RENEW_BEFORE = dt.timedelta(hours=8)


def _write_pair(directory: Path, name: str, key_bytes: bytes, cert_bytes: bytes) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    key_path, cert_path = directory / f"{name}.key", directory / f"{name}.crt"
    for path, data, mode in ((key_path, key_bytes, 0o600), (cert_path, cert_bytes, 0o644)):
        tmp = path.with_suffix(path.suffix + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        tmp.replace(path)
    return key_path, cert_path


def join_cluster(server: str, token: str, ca_file: Path, node: str, directory: Path, context_name: str,
                 token_server: str | None = None) -> Context:
    """Send a CSR for `node` with a join token (to the bearer-token listener, by default the port
    after `server`); return a context that uses the new node certificate."""
    bootstrap = Context(name=context_name, server=server, token_server=token_server or token_address(server),
                        ca=str(ca_file))
    key = new_key()
    with Client(bootstrap, anonymous=True) as anon:
        request = api_pb2.JoinRequest(token=token, node=node, csr=make_csr(key, node))
        reply = anon.unary(anon.agent, "Join", request)
    key_path, cert_path = _write_pair(directory, node, key_pem(key), reply.cert)
    return replace(bootstrap, cert=str(cert_path), key=str(key_path))


def needs_renewal(context: Context, now: dt.datetime | None = None) -> bool:
    cert = load_cert(Path(context.cert or "").read_bytes())
    return cert.not_valid_after_utc - (now or dt.datetime.now(dt.UTC)) < RENEW_BEFORE


def renew_certificate(context: Context) -> dt.datetime:
    """Get a fresh node certificate for a fresh key (over the still-valid current one); returns its expiry."""
    key = new_key()
    name = Path(context.cert or "node").stem
    with Client(context) as client:
        reply = client.unary(client.agent, "RenewCert", api_pb2.CsrRequest(csr=make_csr(key, name)))
    _write_pair(Path(context.cert or "").parent, name, key_pem(key), reply.cert)
    return load_cert(reply.cert).not_valid_after_utc
