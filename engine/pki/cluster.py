"""The files `cca init` creates for a cluster: CA, server and admin certificates, master key.

They live in one directory (`<CCA_HOME>/clusters/<context>/` by default); `ClusterFiles` names each
file, `init_cluster` writes them (keys 0600, never overwriting) and `load_ca` reads the CA back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ccattler.engine.facts import CcaError
from ccattler.engine.pki.ca import (
    ADMIN_LIFETIME,
    SERVER_LIFETIME,
    CertificateAuthority,
    cert_pem,
    key_pem,
    new_key,
)
from ccattler.engine.secrets.envelope import write_master_key

ADMIN_GROUP = "cluster-admins"


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (or `[v6]:port`) → (host, port), with a clear error."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise CcaError(f"address {address!r} must be HOST:PORT (e.g. 127.0.0.1:7443)")
    return host.strip("[]"), int(port)


@dataclass(frozen=True, slots=True)
class ClusterFiles:
    """Paths of one cluster's PKI material and master key."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.root / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.root / "server.key"

    @property
    def admin_cert(self) -> Path:
        return self.root / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.root / "admin.key"

    @property
    def master_key(self) -> Path:
        return self.root / "master.key"

    def load_ca(self) -> CertificateAuthority:
        try:
            return CertificateAuthority.load(self.ca_cert.read_bytes(), self.ca_key.read_bytes())
        except FileNotFoundError as exc:
            raise CcaError(f"cluster CA not found: {exc.filename} (run `cca init`)") from None


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def init_cluster(root: Path, server_address: str, extra_hosts: tuple[str, ...] = ()) -> ClusterFiles:
    """Create CA, server certificate (SANs: the address's host, localhost), admin certificate and
    master key under `root`; refuse if a cluster is already there."""
    host, _ = split_address(server_address)
    files = ClusterFiles(root)
    if files.ca_cert.exists():
        raise CcaError(f"a cluster already exists in {root}; choose another --context or remove it")
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca = CertificateAuthority.create()
    hosts = tuple(dict.fromkeys((host, "localhost", "127.0.0.1", *extra_hosts)))
    server_key = new_key()
    server_cert = ca.issue(server_key.public_key(), name="ccattler-server", kind="server",
                           lifetime=SERVER_LIFETIME, hosts=hosts, server=True)
    admin_key = new_key()
    admin_cert = ca.issue(admin_key.public_key(), name="admin", kind="admin",
                          lifetime=ADMIN_LIFETIME, groups=(ADMIN_GROUP,))
    _write(files.ca_key, key_pem(ca.key), 0o600)
    _write(files.ca_cert, cert_pem(ca.cert), 0o644)
    _write(files.server_key, key_pem(server_key), 0o600)
    _write(files.server_cert, cert_pem(server_cert), 0o644)
    _write(files.admin_key, key_pem(admin_key), 0o600)
    _write(files.admin_cert, cert_pem(admin_cert), 0o644)
    write_master_key(files.master_key)
    return files
