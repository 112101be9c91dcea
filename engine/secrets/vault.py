"""Secret values in the store: set, list, delete, rotate and (for agents only) reveal.

Values live envelope-encrypted at `secret/<tenant>/<name>`; listing returns metadata only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ccattler.engine.facts import parse_service
from ccattler.engine.facts.keys import SECRETS
from ccattler.engine.secrets.envelope import KeyProvider, SecretError, seal, unseal
from ccattler.engine.store import Compare, Store


class SecretConflict(SecretError):
    """The secret changed while it was being written; nothing was written, retrying may succeed."""

    retriable = True


def secret_key(ref: str, tenant: str) -> tuple[str, str]:
    """(store key, "tenant/name") for a secret named `name` or `tenant/name` (names are checked)."""
    parsed = parse_service(ref, tenant)
    return f"{SECRETS}{parsed.tenant}/{parsed.name}", parsed.full


@dataclass(frozen=True, slots=True)
class SecretInfo:
    """What a user may see of a secret: never the value."""

    name: str
    version: int
    updated: float
    key_id: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "updated": self.updated, "key_id": self.key_id}


def set_secret(store: Store, provider: KeyProvider, ref: str, tenant: str, value: bytes) -> SecretInfo:
    """Store a new version of the secret (guarded: a concurrent writer makes this fail, not merge)."""
    key, full = secret_key(ref, tenant)
    current = store.get(key)
    version = (current.value["version"] + 1) if current else 1
    document = seal(provider, full, value, version) | {"updated": time.time()}
    ok, _ = store.txn([Compare(key, current.mod_revision if current else 0)], [(key, document)])
    if not ok:
        raise SecretConflict(f"secret {full} changed while it was being set; try again")
    return SecretInfo(full, version, document["updated"], document["key_id"])


def rotate_secret(store: Store, provider: KeyProvider, ref: str, tenant: str) -> SecretInfo:
    """Re-encrypt the current value under a fresh data key (and the provider's current master key)."""
    key, full = secret_key(ref, tenant)
    current = store.get(key)
    if current is None:
        raise SecretError(f"secret {full} has no value (set it with `cca secret set`)")
    return set_secret(store, provider, ref, tenant, unseal(provider, full, current.value))


def delete_secret(store: Store, ref: str, tenant: str) -> bool:
    key, _ = secret_key(ref, tenant)
    if store.get(key) is None:
        return False
    store.delete(key)
    return True


def list_secrets(store: Store, tenant: str | None) -> list[SecretInfo]:
    """Metadata of every secret in `tenant` (None: all tenants)."""
    facts, _ = store.range(SECRETS if tenant is None else f"{SECRETS}{tenant}/")
    return [
        SecretInfo(f.key.removeprefix(SECRETS), f.value.get("version", 0), f.value.get("updated", 0.0),
                   f.value.get("key_id", "?"))
        for f in facts
    ]


def reveal_secret(store: Store, provider: KeyProvider, full: str) -> bytes | None:
    """The plaintext of `tenant/name`, for delivery to an agent that runs an instance granted it."""
    fact = store.get(f"{SECRETS}{full}")
    return None if fact is None else unseal(provider, full, fact.value)
