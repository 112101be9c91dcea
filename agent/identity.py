"""Workload identities on the node: for each instance, a key made here (never sent), a CSR for
`spiffe://ccattler/<tenant>/<service>`, the X.509-SVID the API server signs for it
(`IssueIdentity`, only for instances placed on this node), handed to the runtime before the
container starts, and rotated at `ROTATE_AT` (2/3) of its lifetime.

Knobs: the `source` (`AgentClient.issue_identity`; None: identities are off, e.g. a node core
without an API connection), `clock` (wall time: lifetimes are certificate dates) and `retry` (seconds
between attempts after a failed rotation; the old identity stays until it expires).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature

from ccattler.agent.desired import InstanceSpec
from ccattler.agent.runtime.base import IdentityFiles
from ccattler.engine.facts import CcaError
from ccattler.engine.pki import PkiError, key_pem, load_cert, new_key
from ccattler.engine.pki.svid import identity_csr, spiffe_id, svid_identity

log = logging.getLogger(__name__)

#: Rotate when this fraction of an identity's lifetime (from when it arrived) has passed.
ROTATE_AT = 2 / 3
#: (tenant/instance, CSR PEM) → (certificate PEM, trust bundle PEM).
IdentitySource = Callable[[str, bytes], tuple[bytes, bytes]]


class IdentityError(CcaError):
    """An instance's identity could not be had (the server refused, or answered nonsense)."""

    retriable = True


@dataclass(frozen=True, slots=True)
class Issued:
    """One identity of one instance, and when it must be replaced."""

    files: IdentityFiles
    spiffe_id: str
    serial: str
    received: float
    expires: float

    @property
    def rotate_at(self) -> float:
        return self.received + ROTATE_AT * (self.expires - self.received)

    def document(self) -> dict[str, Any]:
        """The `identity` of the observed instance document (docs/facts.md)."""
        return {"spiffe_id": self.spiffe_id, "serial": self.serial, "expires": self.expires,
                "rotates": round(self.rotate_at, 3)}


def identity_of(spec: InstanceSpec) -> str:
    return spiffe_id(spec.tenant, spec.service.split("/", 1)[-1])


def request_identity(source: IdentitySource, spec: InstanceSpec, now: float) -> Issued:
    """Make a key and CSR for `spec`'s identity, ask `source`, check the answer fits both."""
    wanted = identity_of(spec)
    key = new_key()
    try:
        cert_pem, bundle_pem = source(spec.key, identity_csr(key, wanted))
    except CcaError as exc:
        raise IdentityError(f"identity {wanted}: {exc}") from None
    try:
        cert, ca = load_cert(cert_pem), load_cert(bundle_pem)
        cert.verify_directly_issued_by(ca)
    except (PkiError, ValueError, TypeError, InvalidSignature) as exc:
        raise IdentityError(f"identity {wanted}: the server's answer does not verify: {exc}") from None
    if svid_identity(cert) != wanted:
        raise IdentityError(f"identity {wanted}: the server's certificate is for {svid_identity(cert)}")
    if cert.public_key() != key.public_key():
        raise IdentityError(f"identity {wanted}: the server's certificate is for another key than ours")
    return Issued(IdentityFiles(cert_pem, key_pem(key), bundle_pem), wanted, f"{cert.serial_number:x}",
                  now, cert.not_valid_after_utc.timestamp())


class Identities:
    """The node's instances' identities: issued before a start, rotated while running. Safe to call
    from the reconciler's worker threads."""

    def __init__(self, source: IdentitySource | None = None, clock: Callable[[], float] = time.time,
                 retry: float = 5.0) -> None:
        self.source, self.clock, self.retry = source, clock, retry
        self._issued: dict[str, Issued] = {}
        self._retry_at: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.source is not None

    def for_start(self, spec: InstanceSpec) -> IdentityFiles:
        """The identity a (re)starting container gets: the current one while it is not due, else a
        new one. Raises `IdentityError`: then the instance does not start."""
        with self._lock:
            current = self._issued.get(spec.key)
        with self._lock:
            self._retry_at.pop(spec.key, None)  # a new container: rotations start over
        fresh = current is not None and self.clock() < current.rotate_at
        if current is not None and fresh and current.spiffe_id == identity_of(spec):
            return current.files
        issued = self._request(spec)
        with self._lock:
            self._issued[spec.key] = issued
        return issued.files

    def due(self, specs: Iterable[InstanceSpec]) -> list[InstanceSpec]:
        """The running instances whose identity must be rotated now (or that have none known here:
        they were started by an earlier agent process)."""
        now = self.clock()
        with self._lock:
            return [s for s in specs if now >= self._retry_at.get(s.key, 0.0)
                    and ((issued := self._issued.get(s.key)) is None or now >= issued.rotate_at
                         or issued.spiffe_id != identity_of(s))]

    def rotate(self, spec: InstanceSpec, write: Callable[[IdentityFiles], bool]) -> bool:
        """Get a new identity for running `spec` and `write` it into its container; the old one is
        kept (and retried after `retry` s) when either fails. True when rotated."""
        try:
            issued = self._request(spec)
            if not write(issued.files):
                with self._lock:  # nothing to rotate until the container is replaced
                    self._retry_at[spec.key] = float("inf")
                log.warning("%s: its container has no identity directory (created without one); it "
                            "gets one when replaced", spec.key)
                return False
        except (CcaError, OSError) as exc:
            with self._lock:
                self._retry_at[spec.key] = self.clock() + self.retry
            log.warning("%s: rotating its identity: %s; retrying in %gs", spec.key, exc, self.retry)
            return False
        with self._lock:
            self._issued[spec.key] = issued
            self._retry_at.pop(spec.key, None)
        log.info("%s: identity %s rotated (serial %s, expires %s)", spec.key, issued.spiffe_id,
                 issued.serial, _utc(issued.expires))
        return True

    def document(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            issued = self._issued.get(name)
        return issued.document() if issued is not None else None

    def forget(self, name: str) -> None:
        with self._lock:
            self._issued.pop(name, None)
            self._retry_at.pop(name, None)

    def _request(self, spec: InstanceSpec) -> Issued:
        if self.source is None:
            raise IdentityError(f"{spec.key} needs an identity and this node has no way to ask for one")
        return request_identity(self.source, spec, self.clock())


def _utc(timestamp: float) -> str:
    return f"{dt.datetime.fromtimestamp(timestamp, dt.UTC):%Y-%m-%d %H:%M:%S} UTC"
