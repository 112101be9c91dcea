"""Secrets: envelope encryption (`envelope`) and the encrypted values in the store (`vault`)."""

from ccattler.engine.secrets.envelope import (
    KeyProvider,
    LocalKeyProvider,
    SecretError,
    add_master_key,
    retire_master_keys,
    seal,
    unseal,
    write_master_key,
)
from ccattler.engine.secrets.vault import (
    SecretInfo,
    delete_secret,
    list_secrets,
    reveal_secret,
    rotate_secret,
    secret_key,
    set_secret,
)

__all__ = [
    "KeyProvider",
    "LocalKeyProvider",
    "SecretError",
    "SecretInfo",
    "add_master_key",
    "delete_secret",
    "list_secrets",
    "retire_master_keys",
    "reveal_secret",
    "rotate_secret",
    "seal",
    "secret_key",
    "set_secret",
    "unseal",
    "write_master_key",
]
