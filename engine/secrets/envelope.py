"""Envelope encryption of secret values: a fresh AES-256-GCM data key per secret version, wrapped
by a `KeyProvider` (the local master key file by default; a KMS implements the same interface).

The stored document holds only ciphertext, nonces and the wrapped key; the tenant/name is bound
into both encryptions as associated data, so a ciphertext copied to another name does not decrypt.
"""

from __future__ import annotations

import base64
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ccattler.engine.facts import CcaError

MASTER_KEY_BYTES = 32
#: The largest secret value accepted (a secret is a password, key or small file, not a blob store).
MAX_SECRET_BYTES = 256 * 1024


class SecretError(CcaError):
    """A secret could not be encrypted or decrypted (wrong key, tampered document, bad input)."""


class KeyProvider(Protocol):
    """Wraps and unwraps data keys; `key_id` names the master key a wrapped key needs."""

    key_id: str

    def wrap(self, data_key: bytes, context: bytes) -> bytes: ...

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes: ...


def write_master_key(path: Path) -> None:
    """Create a fresh master key file readable only by its owner (0600); never overwrite one."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64encode(AESGCM.generate_key(bit_length=256)) + b"\n")


@dataclass(frozen=True, slots=True)
class LocalKeyProvider:
    """A master key held in a local file (base64 of 32 bytes, mode 0600)."""

    key: bytes
    key_id: str = "local"

    @classmethod
    def from_file(cls, path: Path) -> LocalKeyProvider:
        try:
            mode = path.stat().st_mode
            raw = base64.b64decode(path.read_bytes().strip(), validate=True)
        except FileNotFoundError:
            raise SecretError(f"master key file {path} does not exist (run `cca init`)") from None
        except ValueError:
            raise SecretError(f"master key file {path} is not base64") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SecretError(f"master key file {path} is readable by others; chmod 600 it")
        if len(raw) != MASTER_KEY_BYTES:
            raise SecretError(f"master key file {path} must hold {MASTER_KEY_BYTES} bytes, has {len(raw)}")
        return cls(raw)

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + AESGCM(self.key).encrypt(nonce, data_key, context)

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        try:
            return AESGCM(self.key).decrypt(wrapped[:12], wrapped[12:], context)
        except InvalidTag:
            raise SecretError("cannot unwrap the data key: wrong master key or tampered secret") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def seal(provider: KeyProvider, ref: str, plaintext: bytes, version: int) -> dict[str, Any]:
    """Encrypt `plaintext` for secret `ref` ("tenant/name") as a storable document."""
    if len(plaintext) > MAX_SECRET_BYTES:
        raise SecretError(f"secret {ref} is {len(plaintext)} bytes; the limit is {MAX_SECRET_BYTES}")
    context = f"{ref}#{version}".encode()
    data_key = AESGCM.generate_key(bit_length=256)
    nonce = os.urandom(12)
    ciphertext = AESGCM(data_key).encrypt(nonce, plaintext, context)
    return {
        "version": version,
        "algorithm": "AES-256-GCM",
        "key_id": provider.key_id,
        "wrapped_key": _b64(provider.wrap(data_key, context)),
        "nonce": _b64(nonce),
        "ciphertext": _b64(ciphertext),
    }


def unseal(provider: KeyProvider, ref: str, document: dict[str, Any]) -> bytes:
    """Decrypt a document made by `seal` for the same `ref`."""
    try:
        context = f"{ref}#{int(document['version'])}".encode()
        wrapped = base64.b64decode(document["wrapped_key"])
        nonce = base64.b64decode(document["nonce"])
        ciphertext = base64.b64decode(document["ciphertext"])
    except (KeyError, TypeError, ValueError):
        raise SecretError(f"secret {ref} is not an envelope document") from None
    data_key = provider.unwrap(wrapped, context)
    try:
        return AESGCM(data_key).decrypt(nonce, ciphertext, context)
    except InvalidTag:
        raise SecretError(f"secret {ref} does not decrypt: tampered or moved") from None
