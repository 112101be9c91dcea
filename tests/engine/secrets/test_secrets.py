"""Envelope encryption: the store holds ciphertext only, each version has a fresh data key, a
tampered or moved document does not decrypt, and the master key file must be private."""

import base64
import json
import os

import pytest

from ccattler.engine.secrets import (
    LocalKeyProvider,
    SecretError,
    list_secrets,
    reveal_secret,
    rotate_secret,
    seal,
    set_secret,
    unseal,
    write_master_key,
)
from ccattler.engine.store import open_store


@pytest.fixture
def provider(tmp_path):
    path = tmp_path / "master.key"
    write_master_key(path)
    return LocalKeyProvider.from_file(path)


@pytest.fixture
def store(tmp_path):
    with open_store(f"sqlite://{tmp_path}/state.db") as s:
        yield s


def test_store_holds_no_plaintext_and_rotation_changes_the_data_key(store, provider):
    set_secret(store, provider, "database.password", "payments", b"hunter2-very-secret")
    raw = json.dumps([f.value for f in store.range("")[0]])
    assert "hunter2" not in raw and base64.b64encode(b"hunter2-very-secret").decode() not in raw
    before = store.get("secret/payments/database.password").value
    info = rotate_secret(store, provider, "database.password", "payments")
    after = store.get("secret/payments/database.password").value
    assert info.version == 2 and after["wrapped_key"] != before["wrapped_key"]
    assert reveal_secret(store, provider, "payments/database.password") == b"hunter2-very-secret"
    assert [s.name for s in list_secrets(store, "payments")] == ["payments/database.password"]


def test_moved_or_tampered_document_does_not_decrypt(provider):
    doc = seal(provider, "a/x", b"v", 1)
    with pytest.raises(SecretError):
        unseal(provider, "b/x", doc)
    tampered = doc | {"ciphertext": base64.b64encode(b"\0" * 17).decode()}
    with pytest.raises(SecretError):
        unseal(provider, "a/x", tampered)


def test_wrong_master_key_does_not_decrypt(provider, tmp_path):
    other = tmp_path / "other.key"
    write_master_key(other)
    with pytest.raises(SecretError, match="is not in"):
        unseal(LocalKeyProvider.from_file(other), "a/x", seal(provider, "a/x", b"v", 1))


def test_world_readable_master_key_is_refused(tmp_path):
    path = tmp_path / "master.key"
    write_master_key(path)
    os.chmod(path, 0o644)
    with pytest.raises(SecretError, match="chmod 600"):
        LocalKeyProvider.from_file(path)


@pytest.mark.parametrize("name", ["../x", "a/b/c", "", "x y"])
def test_path_like_secret_names_are_refused(store, provider, name):
    with pytest.raises(Exception, match="name|tenant"):
        set_secret(store, provider, name, "default", b"v")
    assert store.range("")[0] == []


def test_master_key_rotation_keeps_old_secrets_readable_until_retired(store, provider):
    from ccattler.engine.secrets import add_master_key, retire_master_keys

    old_id = provider.key_id
    set_secret(store, provider, "a", "t", b"one")
    new_id = add_master_key(provider.path)
    assert provider.key_id == new_id != old_id  # the running provider re-reads the file
    assert reveal_secret(store, provider, "t/a") == b"one"  # wrapped by the old key, still readable
    assert rotate_secret(store, provider, "a", "t").key_id == new_id
    assert retire_master_keys(provider.path) == [old_id]
    assert reveal_secret(store, provider, "t/a") == b"one"
    assert provider.keys == (provider.keys[0],)
