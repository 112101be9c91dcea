"""Authentication: who is calling. On the mutual-TLS listener the verified client certificate says
(CN, OU, O); on the token listener a `Bearer` token names a user record. Admission decides what the
resulting `Principal` may do."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading

import grpc

from ccattler.engine.admission.model import Principal
from ccattler.engine.api.errors import Unauthenticated
from ccattler.engine.auth import TokenError, check_token, get_user
from ccattler.engine.pki import PkiError, identity_of, load_cert
from ccattler.engine.store import Store

#: Certificate OU → principal kind.
_CERT_KINDS = {"admin": "admin", "node": "node", "workload": "service", "user": "user"}


class CertAuthenticator:
    """Principals from client certificates. The TLS handshake verified chain and dates when the
    connection opened; each call checks the date again, since a channel outlives a 1 h certificate."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[Principal, dt.datetime]] = {}
        self._lock = threading.Lock()

    def __call__(self, context: grpc.ServicerContext) -> Principal:
        pems = context.auth_context().get("x509_pem_cert")
        if not pems:
            raise Unauthenticated("no client certificate presented")
        digest = hashlib.sha256(pems[0]).hexdigest()
        with self._lock:
            cached = self._cache.get(digest)
        if cached is None:
            cached = self._load(pems[0])
            with self._lock:
                if len(self._cache) > 10_000:
                    self._cache.clear()
                self._cache[digest] = cached
        principal, expires = cached
        if expires < dt.datetime.now(dt.UTC):
            raise Unauthenticated(f"client certificate of {principal.kind} {principal.name} expired at "
                                  f"{expires:%Y-%m-%d %H:%M} UTC; renew it and reconnect")
        return principal

    def _load(self, pem: bytes) -> tuple[Principal, dt.datetime]:
        try:
            cert = load_cert(pem)
            identity = identity_of(cert)
        except PkiError as exc:
            raise Unauthenticated(str(exc)) from None
        kind = _CERT_KINDS.get(identity.kind)
        if kind is None:
            raise Unauthenticated(f"client certificate kind {identity.kind!r} may not call the API")
        return Principal(identity.name, kind, None, identity.groups), cert.not_valid_after_utc


class TokenAuthenticator:
    """Principals from `authorization: Bearer cca.<id>.<secret>` metadata (user tokens only)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, context: grpc.ServicerContext) -> Principal:
        header = dict(context.invocation_metadata()).get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated(
                "this listener needs a bearer token (authorization: Bearer …); "
                "clients with a certificate use the mutual-TLS address"
            )
        try:
            record = check_token(self.store, token, "user")
        except TokenError as exc:
            raise Unauthenticated(str(exc)) from None
        user = get_user(self.store, record.user or "")
        if user is None:
            raise Unauthenticated(f"token {record.id} belongs to a user that no longer exists")
        return Principal(user.name, "user", user.team, user.groups)
