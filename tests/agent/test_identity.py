"""Workload identities on the node, with a hand-moved wall clock and a real CA as the source: issued
before a start (no identity, no start), rotated at 2/3 of the lifetime, kept on a failed rotation
and retried, written as files the process runtime swaps atomically."""

from __future__ import annotations

import datetime as dt
import os
import stat
import time

import pytest

from ccattler.agent.desired import InstanceSpec
from ccattler.agent.identity import Identities, IdentityError
from ccattler.agent.reconcile import Reconciler
from ccattler.agent.runtime.base import IdentityFiles
from ccattler.agent.runtime.identity_files import read_identity, write_identity
from ccattler.agent.runtime.process import ProcessRuntime
from ccattler.engine.facts import CcaError
from ccattler.engine.pki import CertificateAuthority, cert_pem, load_cert
from ccattler.engine.pki.svid import check_identity_csr, issue_svid, spiffe_id, svid_identity

LIFETIME = 60.0
WEB = "spiffe://ccattler/shop/web"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class Server:
    """Signs like IssueIdentity (CSR checked for the instance's service); `refuse` makes it fail."""

    def __init__(self, lifetime: float = LIFETIME) -> None:
        self.ca, self.lifetime, self.calls, self.refuse = CertificateAuthority.create(), lifetime, [], None

    def __call__(self, instance: str, csr: bytes) -> tuple[bytes, bytes]:
        self.calls.append(instance)
        if self.refuse:
            raise CcaError(self.refuse)
        tenant = instance.split("/")[0]
        key = check_identity_csr(csr, spiffe_id(tenant, "web"))
        cert = issue_svid(self.ca, key, spiffe_id(tenant, "web"), dt.timedelta(seconds=self.lifetime))
        return cert_pem(cert), cert_pem(self.ca.cert)


def web(name: str = "web-a1") -> InstanceSpec:
    return InstanceSpec(tenant="shop", name=name, service="shop/web", image="busybox", command="sleep 60")


def serial(files: IdentityFiles) -> int:
    return load_cert(files.cert).serial_number


def test_rotation_is_due_at_two_thirds_of_the_lifetime():
    clock, server = Clock(), Server()
    identities = Identities(server, clock)
    first = identities.for_start(web())
    assert svid_identity(load_cert(first.cert)) == WEB and b"PRIVATE KEY" in first.key
    assert identities.for_start(web()) == first  # a restart within its life keeps it
    # 2/3 of 60 s is 40 s; certificate dates keep whole seconds, hence the margins.
    clock.now += 38
    assert identities.due([web()]) == []
    clock.now += 4
    assert identities.due([web()]) == [web()]
    written = []
    assert identities.rotate(web(), lambda files: written.append(files) or True)
    assert serial(written[0]) != serial(first) and identities.due([web()]) == []
    doc = identities.document("shop/web-a1")
    assert doc["spiffe_id"] == WEB and doc["serial"] == f"{serial(written[0]):x}"
    assert doc["rotates"] == pytest.approx(clock.now + 2 / 3 * (doc["expires"] - clock.now), abs=1.5)


def test_a_failed_rotation_keeps_the_identity_and_retries_later():
    clock, server = Clock(), Server()
    identities = Identities(server, clock, retry=5)
    first = identities.for_start(web())
    clock.now += LIFETIME * 0.72
    server.refuse = "server unavailable"
    assert not identities.rotate(web(), lambda files: True)
    assert identities.document("shop/web-a1")["serial"] == f"{serial(first):x}"
    assert identities.due([web()]) == []  # waiting out the retry
    clock.now += 5
    server.refuse = None
    assert identities.due([web()]) == [web()]
    assert identities.rotate(web(), lambda files: True)


def test_a_container_without_an_identity_directory_is_not_asked_for_again_until_replaced():
    clock, server = Clock(), Server()
    identities = Identities(server, clock)
    assert identities.due([web()]) == [web()]  # running, unknown here: an earlier agent started it
    assert not identities.rotate(web(), lambda files: False)  # created without an identity directory
    clock.now += 3 * LIFETIME
    assert identities.due([web()]) == [] and server.calls == ["shop/web-a1"]
    identities.for_start(web())  # its replacement starts with one
    clock.now += LIFETIME
    assert identities.due([web()]) == [web()]


def test_an_answer_for_another_identity_or_key_or_ca_is_refused():
    server, stranger = Server(), Server()

    def other_identity(instance, csr):
        key = check_identity_csr(csr, WEB)
        cert = issue_svid(server.ca, key, "spiffe://ccattler/shop/db", dt.timedelta(minutes=1))
        return cert_pem(cert), cert_pem(server.ca.cert)

    with pytest.raises(IdentityError, match="is for spiffe://ccattler/shop/db"):
        Identities(other_identity, Clock()).for_start(web())
    wrong_key = issue_svid(server.ca, stranger.ca.key.public_key(), WEB, dt.timedelta(minutes=1))
    with pytest.raises(IdentityError, match="another key"):
        Identities(lambda i, csr: (cert_pem(wrong_key), cert_pem(server.ca.cert)), Clock()).for_start(web())
    with pytest.raises(IdentityError, match="does not verify"):  # signed by a CA not in the bundle
        Identities(lambda i, csr: (cert_pem(wrong_key), cert_pem(stranger.ca.cert)), Clock()).for_start(web())


def test_files_are_swapped_at_once_and_the_key_is_private(tmp_path):
    server = Server()
    first, second = (Identities(server, Clock()).for_start(web()) for _ in range(2))
    write_identity(tmp_path, first)
    assert read_identity(tmp_path) == first
    assert stat.S_IMODE(os.stat(tmp_path / "key.pem").st_mode) == 0o400
    assert os.readlink(tmp_path / "cert.pem") == "..data/cert.pem"
    target = os.readlink(tmp_path / "..data")
    write_identity(tmp_path, second)
    assert read_identity(tmp_path) == second and os.readlink(tmp_path / "..data") != target
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["..2", "..data", "bundle.pem", "cert.pem", "key.pem"]  # the old version went


def test_an_instance_starts_only_with_its_identity_mounted_and_rotates_in_place(tmp_path):
    clock, server = Clock(), Server()
    runtime = ProcessRuntime(tmp_path)
    identities = Identities(server, clock)
    rec = Reconciler("n1", runtime, identities=identities, workers=1)
    folder = tmp_path / "processes"
    try:
        server.refuse = "instance shop/web-a1 is not placed on node n1"
        doc = rec.reconcile({"shop/web-a1": web()})["observed/instance/shop/web-a1"]
        assert doc["state"] == "failed" and "not placed on node n1" in doc["reason"]
        assert runtime.list() == []  # no identity, no start
        server.refuse = None
        rec._records["shop/web-a1"].retry_at = 0.0
        doc = rec.reconcile({"shop/web-a1": web()})["observed/instance/shop/web-a1"]
        assert doc["state"] == "running" and doc["identity"]["spiffe_id"] == WEB
        [identity_dir] = folder.glob("*/root/run/ccattler/identity")
        mounted = read_identity(identity_dir)
        assert mounted is not None and f"{serial(mounted):x}" == doc["identity"]["serial"]
        clock.now += LIFETIME * 0.72
        doc = rec.reconcile({"shop/web-a1": web()})["observed/instance/shop/web-a1"]
        rotated = read_identity(identity_dir)
        assert serial(rotated) != serial(mounted) and doc["identity"]["serial"] == f"{serial(rotated):x}"
        assert [s.state for s in runtime.list()] == ["running"]  # rotated under the running process
        assert server.calls == ["shop/web-a1"] * 3
    finally:
        rec.remove_all()
        rec.close()


def test_without_a_source_identities_are_off(tmp_path):
    runtime = ProcessRuntime(tmp_path)
    rec = Reconciler("n1", runtime, identities=Identities(), workers=1)
    try:
        doc = rec.reconcile({"shop/web-a1": web()})["observed/instance/shop/web-a1"]
        assert doc["state"] == "running" and "identity" not in doc
    finally:
        rec.remove_all()
        rec.close()
