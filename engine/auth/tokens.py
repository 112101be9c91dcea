"""Bearer and join tokens: `cca.<id>.<secret>`, stored hashed at `auth/token/<id>`, expiring.

Join tokens are single-use: redeeming one deletes it in a transaction guarded by its revision, so
a replay (or two nodes racing with one token) fails. `DEFAULT_JOIN_TTL` and `DEFAULT_USER_TTL` set
the lifetimes when the caller gives none.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal

from ccattler.engine.facts import CcaError
from ccattler.engine.facts.keys import AUTH_TOKENS
from ccattler.engine.store import Compare, Store

DEFAULT_JOIN_TTL = 3600.0
DEFAULT_USER_TTL = 30 * 24 * 3600.0
MAX_TTL = 366 * 24 * 3600.0
_TOKEN = re.compile(r"cca\.([0-9a-f]{12})\.([A-Za-z0-9_\-]{32,64})\Z")


class TokenError(CcaError):
    """A token is malformed, unknown, expired, already used or of the wrong kind."""


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A stored token (its hash only) and what it grants."""

    id: str
    kind: Literal["join", "user"]
    expires: float
    user: str | None
    mod_revision: int


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(
    store: Store, kind: Literal["join", "user"], ttl: float, *, user: str | None = None, by: str = ""
) -> tuple[str, TokenRecord]:
    """Make a token; the plaintext is returned once and never stored."""
    if not 0 < ttl <= MAX_TTL:
        raise TokenError(f"token ttl must be between 1 second and {int(MAX_TTL // 86400)} days")
    token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    expires = time.time() + ttl
    document: dict[str, Any] = {"kind": kind, "hash": _hash(secret), "expires": expires, "user": user,
                                "created": time.time(), "created_by": by}
    key = f"{AUTH_TOKENS}{token_id}"
    ok, revision = store.txn([Compare(key, 0)], [(key, document)])
    if not ok:
        raise TokenError("token id collision; try again")
    return f"cca.{token_id}.{secret}", TokenRecord(token_id, kind, expires, user, revision)


def check_token(
    store: Store, token: str, kind: Literal["join", "user"], now: float | None = None
) -> TokenRecord:
    """The record for a valid, unexpired token of `kind`; otherwise `TokenError` (one vague message
    for unknown and wrong secrets, so a caller cannot probe ids)."""
    match = _TOKEN.match(token.strip())
    if not match:
        raise TokenError("token is malformed (expected cca.<id>.<secret>)")
    token_id, secret = match.groups()
    fact = store.get(f"{AUTH_TOKENS}{token_id}")
    if fact is None or not hmac.compare_digest(fact.value.get("hash", ""), _hash(secret)):
        raise TokenError(f"token {token_id} is unknown, revoked or already used")
    if fact.value.get("kind") != kind:
        raise TokenError(f"token {token_id} is a {fact.value.get('kind')} token, not a {kind} token")
    if fact.value["expires"] < (now or time.time()):
        raise TokenError(f"token {token_id} has expired")
    return TokenRecord(token_id, kind, fact.value["expires"], fact.value.get("user"), fact.mod_revision)


def redeem_join_token(store: Store, token: str) -> TokenRecord:
    """Check a join token and delete it atomically: it works exactly once."""
    record = check_token(store, token, "join")
    key = f"{AUTH_TOKENS}{record.id}"
    ok, _ = store.txn([Compare(key, record.mod_revision)], (), [key])
    if not ok:
        raise TokenError(f"token {record.id} is unknown, revoked or already used")
    return record


def revoke_token(store: Store, token_id: str) -> bool:
    """Delete a join or user token by id; False when there is none."""
    if not re.fullmatch(r"[0-9a-f]{12}", token_id):
        raise TokenError(f"token id {token_id!r} is malformed (12 hex digits)")
    key = f"{AUTH_TOKENS}{token_id}"
    if store.get(key) is None:
        return False
    store.delete(key)
    return True


def list_tokens(store: Store) -> list[dict[str, Any]]:
    """Token metadata (never hashes)."""
    facts, _ = store.range(AUTH_TOKENS)
    return [{"id": f.key.rsplit("/", 1)[1], "kind": f.value.get("kind"), "user": f.value.get("user"),
             "expires": f.value.get("expires"), "created_by": f.value.get("created_by")} for f in facts]
