"""An instance's identity files, `cert.pem`, `key.pem` (0400) and `bundle.pem`, in one directory
the container gets read-only at `/run/ccattler/identity` — the directory, not the files, so a
rotation is seen inside.

A rotation swaps all three at once, the way Kubernetes' AtomicWriter does for projected volumes:
each version is a hidden directory `..<n>`, `..data` is a symlink to the current one, and each
file name is a symlink through it (`cert.pem -> ..data/cert.pem`); a new version is written
whole, then `..data` is replaced by one rename. A reader never sees a new certificate beside an
old key. Under runc the directory is a private tmpfs in the bundle (the key is never on disk).
"""

from __future__ import annotations

import ctypes
import os
import shutil
from pathlib import Path
from typing import Any

from ccattler.agent.runtime.base import ContainerError, IdentityFiles

#: Where the container sees its identity.
IDENTITY_DIR = "/run/ccattler/identity"
_DATA = "..data"
_MODES = {"cert.pem": 0o444, "key.pem": 0o400, "bundle.pem": 0o444}

_libc = ctypes.CDLL(None, use_errno=True)
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MNT_DETACH = 2


def _contents(identity: IdentityFiles) -> dict[str, bytes]:
    return {"cert.pem": identity.cert, "key.pem": identity.key, "bundle.pem": identity.bundle}


def write_identity(folder: Path, identity: IdentityFiles) -> None:
    """Write a new version of the identity into `folder` and switch to it atomically."""
    versions = sorted(int(p.name[2:]) for p in folder.glob("..[0-9]*") if p.name[2:].isdigit())
    version = folder / f"..{(versions[-1] + 1) if versions else 1}"
    version.mkdir(mode=0o755)
    for name, data in _contents(identity).items():
        fd = os.open(version / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _MODES[name])
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    link = folder / f"{_DATA}.tmp"
    link.unlink(missing_ok=True)
    link.symlink_to(version.name)
    link.replace(folder / _DATA)  # the switch: one rename
    for name in _MODES:
        if not (folder / name).is_symlink():
            (folder / name).symlink_to(f"{_DATA}/{name}")
    for old in versions:
        shutil.rmtree(folder / f"..{old}", ignore_errors=True)


def read_identity(folder: Path) -> IdentityFiles | None:
    """The identity `folder` holds now, or None when it holds none."""
    try:
        files = {name: (folder / name).read_bytes() for name in _MODES}
    except OSError:
        return None
    return IdentityFiles(files["cert.pem"], files["key.pem"], files["bundle.pem"])


def mount_identity(bundle: Path, identity: IdentityFiles | None) -> list[dict[str, Any]]:
    """A fresh tmpfs `<bundle>/identity` holding the identity; the OCI mount exposing it read-only."""
    if identity is None:
        return []
    folder = bundle / "identity"
    folder.mkdir(mode=0o755)
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc.mount(b"tmpfs", str(folder).encode(), b"tmpfs", flags, b"mode=0755,size=256k") != 0:
        reason = os.strerror(ctypes.get_errno())
        raise ContainerError(f"cannot mount a tmpfs for the identity at {folder}: {reason}")
    write_identity(folder, identity)
    return [{"destination": IDENTITY_DIR, "type": "bind", "source": str(folder),
             "options": ["rbind", "ro", "nosuid", "nodev", "noexec"]}]


def unmount_identity(bundle: Path) -> None:
    """Drop the identity tmpfs (and the key with it) if it is mounted."""
    folder = bundle / "identity"
    if os.path.ismount(folder):
        _libc.umount2(str(folder).encode(), _MNT_DETACH)


def rotate_identity(bundle: Path, identity: IdentityFiles) -> bool:
    """Switch a runc container's identity to `identity`; False when it has no identity tmpfs (it
    was created without one)."""
    folder = bundle / "identity"
    if not os.path.ismount(folder):
        return False
    write_identity(folder, identity)
    return True
