"""Envelope encryption of secret values: a fresh AES-256-GCM data key per secret version, wrapped
by a `KeyProvider` (the local master key file by default; a KMS implements the same interface).
Master keys rotate like Kubernetes' encryption config: the file's first key wraps, every key in it
unwraps (`add_master_key`, re-wrap with `rotate_secret`, then `retire_master_keys`).

The stored document holds only ciphertext, nonces and the wrapped key; the tenant/name is bound
into both encryptions as associated data, so a ciphertext copied to another name does not decrypt.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import threading
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
    """Wraps data keys with the current master key (`key_id`) and unwraps them with the key a
    document names, so master keys can be rotated while old documents stay readable."""

    @property
    def key_id(self) -> str: ...

    def wrap(self, data_key: bytes, context: bytes) -> bytes: ...

    def unwrap(self, wrapped: bytes, context: bytes, key_id: str) -> bytes: ...


def _key_id(key: bytes) -> str:
    return "local:" + hashlib.sha256(key).hexdigest()[:12]


def _new_key_line() -> bytes:
    return base64.b64encode(AESGCM.generate_key(bit_length=256)) + b"\n"


def write_master_key(path: Path) -> None:
    """Create a fresh master key file readable only by its owner (0600); never overwrite one."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(_new_key_line())


def _rewrite(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def add_master_key(path: Path) -> str:
    """Put a new current master key first in the file (older keys still unwrap); its id."""
    old = LocalKeyProvider(path).keys  # validates the file first
    line = _new_key_line()
    _rewrite(path, line + b"".join(base64.b64encode(k) + b"\n" for k in old))
    return _key_id(base64.b64decode(line.strip()))


def retire_master_keys(path: Path) -> list[str]:
    """Keep only the current master key; the ids of the keys removed."""
    keys = LocalKeyProvider(path).keys
    _rewrite(path, base64.b64encode(keys[0]) + b"\n")
    return [_key_id(k) for k in keys[1:]]


class LocalKeyProvider:
    """Master keys in a local file (mode 0600): one base64 key of 32 bytes per line, the first one
    current. The file is re-read when it changes, so a running server picks up a rotation."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._loaded: tuple[tuple[int, int], tuple[bytes, ...]] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path) -> LocalKeyProvider:
        provider = cls(path)
        provider.keys  # noqa: B018 (fail now, not at the first secret)
        return provider

    @property
    def keys(self) -> tuple[bytes, ...]:
        path = self.path
        try:
            st = path.stat()
        except FileNotFoundError:
            raise SecretError(f"master key file {path} does not exist (run `cca init`)") from None
        with self._lock:
            version = (st.st_ino, st.st_mtime_ns)  # a rewrite replaces the file: a new inode
            if self._loaded is not None and self._loaded[0] == version:
                return self._loaded[1]
            if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise SecretError(f"master key file {path} is readable by others; chmod 600 it")
            try:
                keys = tuple(base64.b64decode(line, validate=True) for line in path.read_bytes().split())
            except ValueError:
                raise SecretError(f"master key file {path} is not base64, one key per line") from None
            if not keys or any(len(k) != MASTER_KEY_BYTES for k in keys):
                raise SecretError(f"master key file {path} must hold 32-byte keys, one per line")
            self._loaded = (version, keys)
            return keys

    @property
    def key_id(self) -> str:
        return _key_id(self.keys[0])

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + AESGCM(self.keys[0]).encrypt(nonce, data_key, context)

    def unwrap(self, wrapped: bytes, context: bytes, key_id: str) -> bytes:
        key = next((k for k in self.keys if _key_id(k) == key_id), None)
        if key is None:
            raise SecretError(f"master key {key_id} is not in {self.path} (retired, or another cluster's)")
        try:
            return AESGCM(key).decrypt(wrapped[:12], wrapped[12:], context)
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
    data_key = provider.unwrap(wrapped, context, str(document.get("key_id", "")))
    try:
        return AESGCM(data_key).decrypt(nonce, ciphertext, context)
    except InvalidTag:
        raise SecretError(f"secret {ref} does not decrypt: tampered or moved") from None
