"""Workload identities on `cca up --nodes 3` with runc and a 20 s identity TTL: each instance's
SVID is mounted read-only at /run/ccattler/identity (key 0400), rotated in place at 2/3 of its life
(the container sees the new files), refused to a node the instance is not placed on, shown by `cca
describe instance`; and two instances on different nodes complete a mutual-TLS handshake with host
openssl run in their network namespaces, each verifying the other's SPIFFE id."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from ccattler.agent.runtime.base import container_id
from ccattler.engine.api.client import ApiError, Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.clientconfig import load_config
from ccattler.engine.pki import load_cert, new_key
from ccattler.engine.pki.svid import identity_csr, svid_identity

pytestmark = pytest.mark.e2e

TTL = 20.0
CLUSTER = """
service server {
    image busybox
    command "exec sleep 3600"
    placement { separate "pair" }
    resources { cpu 50m  memory 16Mi }
}
service client {
    image busybox
    command "exec sleep 3600"
    placement { separate "pair" }
    resources { cpu 50m  memory 16Mi }
}
"""


@pytest.fixture
def identity_ttl() -> float:
    return TTL


def _identity_dir(state: Path, row: dict) -> Path:
    """The instance's mounted identity directory, seen from the host (in its runc bundle)."""
    return state / row["node"] / "containers" / container_id(f"{row['tenant']}/{row['name']}") / "identity"


def _pid(state: Path, row: dict) -> str:
    return (_identity_dir(state, row).parent / "pid").read_text().strip()


def _copy_identity(folder: Path, into: Path) -> x509.Certificate:
    """One consistent version (cert, key, bundle) read through `..data` once, as an application
    reloading its identity should; copied, since the next rotation deletes that version."""
    for _ in range(5):
        version = folder / os.readlink(folder / "..data")
        try:
            files = {name: (version / name).read_bytes() for name in ("cert.pem", "key.pem", "bundle.pem")}
        except FileNotFoundError:  # rotated between the two reads
            continue
        into.mkdir(exist_ok=True)
        for name, data in files.items():
            (into / name).write_bytes(data)
        return load_cert(files["cert.pem"])
    raise AssertionError(f"no stable identity version in {folder}")


def _exec(shell, row: dict, script: str) -> str:
    return shell.cca("exec", f"{row['tenant']}/{row['name']}", "--", "sh", "-c", script).stdout


def _pem(text: str) -> x509.Certificate:
    return x509.load_pem_x509_certificates(text.encode())[0]


def _peer_certificates(output: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(output.encode()) if "BEGIN CERTIFICATE" in output else []


def test_identities_issued_rotated_refused_and_used_for_mtls(three_nodes, wait, tmp_path):
    shell, state = three_nodes.shell, tmp_path / "state"
    (tmp_path / "pair.cca").write_text(CLUSTER)
    shell.cca("apply", str(tmp_path / "pair.cca"))

    def running():
        rows = {r["service"]: r for r in shell.instances()}
        ok = len(rows) == 2 and all(r["state"] == "running" and r["ip"] for r in rows.values())
        return rows if ok and all((_identity_dir(state, r) / "cert.pem").exists() for r in rows.values()) \
            else None

    rows = wait(running, "both instances running with an identity", timeout=60)
    server, client = rows["default/server"], rows["default/client"]
    assert server["node"] != client["node"]

    # Issued: the SVID of its service (the key made on the node), mounted read-only, key 0400.
    first = load_cert((_identity_dir(state, server) / "cert.pem").read_bytes())
    assert svid_identity(first) == "spiffe://ccattler/default/server"

    # Rotated: a new serial at 2/3 of the 20 s (by the certificates' own dates: X.509 keeps seconds).
    def rotated():
        current = load_cert((_identity_dir(state, server) / "cert.pem").read_bytes())
        return current if current.serial_number != first.serial_number else None

    second = wait(rotated, "the server instance's identity to rotate", timeout=TTL)
    delta = (second.not_valid_after_utc - first.not_valid_after_utc).total_seconds()
    assert 2 / 3 * TTL - 1.5 <= delta <= 2 / 3 * TTL + 5, delta  # + the agent's tick on a loaded host
    seen_inside = _pem(_exec(shell, server, "cat /run/ccattler/identity/cert.pem"))
    assert seen_inside.serial_number != first.serial_number  # the mounted directory shows it

    inside = _exec(shell, server, "stat -L -c '%a' /run/ccattler/identity/key.pem; "
                   "touch /run/ccattler/identity/x 2>/dev/null || echo read-only")
    assert inside.split() == ["400", "read-only"], inside
    described = shell.cca("describe", "instance", server["name"]).stdout
    assert "Identity:         spiffe://ccattler/default/server" in described and "expires" in described

    # Refused: another node's certificate asking for this instance's identity (audited as denied).
    elsewhere = next(n for n in three_nodes.names if n != server["node"])
    with Client(load_config(shell.home).context(f"node-{elsewhere}"), timeout=10) as api, \
            pytest.raises(ApiError) as err:
        api.unary(api.agent, "IssueIdentity", api_pb2.IdentityRequest(
            instance=f"default/{server['name']}", csr=identity_csr(new_key(), "spiffe://ccattler/default/server")))
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED, err.value
    audit = shell.cca("audit", "-n", "200").stdout
    assert any(elsewhere in line and "IssueIdentity" in line and "denied" in line
               for line in audit.splitlines()), audit

    # mTLS: s_server in the server's netns, s_client in the client's, each verifying the other.
    ours, theirs = tmp_path / "srv", tmp_path / "cli"
    _copy_identity(_identity_dir(state, server), ours)
    _copy_identity(_identity_dir(state, client), theirs)
    port = "18443"
    s_server = subprocess.Popen(
        ["nsenter", "-t", _pid(state, server), "-n", "openssl", "s_server", "-accept", port, "-naccept", "1",
         "-cert", str(ours / "cert.pem"), "-key", str(ours / "key.pem"), "-CAfile", str(ours / "bundle.pem"),
         "-Verify", "1", "-verify_return_error"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.5)
        done = subprocess.run(
            ["nsenter", "-t", _pid(state, client), "-n", "openssl", "s_client", "-connect",
             f"{server['ip']}:{port}", "-cert", str(theirs / "cert.pem"), "-key", str(theirs / "key.pem"),
             "-CAfile", str(theirs / "bundle.pem"), "-verify_return_error", "-showcerts"],
            input="hello\n", capture_output=True, text=True, timeout=20)
        served, _ = s_server.communicate(timeout=20)
    finally:
        if s_server.poll() is None:
            s_server.kill()
            s_server.wait()
    assert "Verify return code: 0 (ok)" in done.stdout, done.stdout + done.stderr
    seen_by_client = _peer_certificates(done.stdout)
    assert svid_identity(seen_by_client[0]) == "spiffe://ccattler/default/server", done.stdout
    seen_by_server = _peer_certificates(served)
    assert seen_by_server and svid_identity(seen_by_server[0]) == "spiffe://ccattler/default/client", served
