"""Secret files of a runc container: a private tmpfs per container (`<bundle>/secrets`, never on
disk) holding each plaintext, bind-mounted read-only at its path; unmounted when the container is
removed, so the plaintext is gone with it.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

from ccattler.agent.runtime.base import ContainerError, SecretFile

_libc = ctypes.CDLL(None, use_errno=True)
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MNT_DETACH = 2


def mount_secrets(bundle: Path, secrets: tuple[SecretFile, ...]) -> list[dict[str, Any]]:
    """Write `secrets` into a fresh tmpfs under `bundle`; returns the OCI mounts that expose them."""
    if not secrets:
        return []
    folder = bundle / "secrets"
    folder.mkdir(mode=0o700)
    size = sum(len(s.value) for s in secrets) + 64 * 1024
    options = f"mode=0700,size={size}".encode()
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc.mount(b"tmpfs", str(folder).encode(), b"tmpfs", flags, options) != 0:
        reason = os.strerror(ctypes.get_errno())
        raise ContainerError(f"cannot mount a tmpfs for secrets at {folder}: {reason}")
    mounts = []
    for index, secret in enumerate(secrets):
        if not secret.path.startswith("/") or ".." in secret.path.split("/"):
            raise ContainerError(f"secret mount {secret.path!r} must be an absolute path without '..'")
        source = folder / str(index)
        fd = os.open(source, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as out:
            out.write(secret.value)
        mounts.append({"destination": secret.path, "type": "bind", "source": str(source),
                       "options": ["bind", "ro", "nosuid", "nodev", "noexec"]})
    return mounts


def unmount_secrets(bundle: Path) -> None:
    """Drop the secrets tmpfs (and with it every plaintext) if it is mounted."""
    folder = bundle / "secrets"
    if os.path.ismount(folder):
        _libc.umount2(str(folder).encode(), _MNT_DETACH)


def refresh_secrets(bundle: Path, secrets: tuple[SecretFile, ...]) -> int:
    """Overwrite changed plaintexts in place (a bind mount pins the inode: never replace the file);
    returns how many changed. Does nothing when the container has no secrets tmpfs."""
    folder = bundle / "secrets"
    if not os.path.ismount(folder):
        return 0
    return sum(overwrite(folder / str(index), secret.value) for index, secret in enumerate(secrets))


def overwrite(path: Path, value: bytes) -> bool:
    """Rewrite `path` in place with `value` when it differs; True when it did."""
    try:
        if path.read_bytes() == value:
            return False
    except FileNotFoundError:
        return False  # not one of this container's secrets
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "wb") as out:
        out.write(value)
    return True
