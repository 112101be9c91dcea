"""Authentication: who is calling. On the mutual-TLS listener the verified client certificate says
(CN, OU, O); on the token listener a `Bearer` token names a user record. Admission decides what the
resulting `Principal` may do."""

from __future__ import annotations

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
    """Principals from client certificates (the TLS handshake already verified them against the CA)."""

    def __init__(self) -> None:
        self._cache: dict[str, Principal] = {}
        self._lock = threading.Lock()

    def __call__(self, context: grpc.ServicerContext) -> Principal:
        pems = context.auth_context().get("x509_pem_cert")
        if not pems:
            raise Unauthenticated("no client certificate presented")
        digest = hashlib.sha256(pems[0]).hexdigest()
        with self._lock:
            cached = self._cache.get(digest)
        if cached is not None:
            return cached
        try:
            identity = identity_of(load_cert(pems[0]))
        except PkiError as exc:
            raise Unauthenticated(str(exc)) from None
        kind = _CERT_KINDS.get(identity.kind)
        if kind is None:
            raise Unauthenticated(f"client certificate kind {identity.kind!r} may not call the API")
        principal = Principal(identity.name, kind, None, identity.groups)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[digest] = principal
        return principal


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
