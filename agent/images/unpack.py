"""Unpacking image layers into one root filesystem, applying OCI whiteouts, never writing outside it.

Layers are tar streams (plain or gzip); `.wh.<name>` deletes `<name>` from lower layers and
`.wh..wh..opq` empties its directory. A member whose path would leave the root (through `..` or
a symlink a previous member planted) is an error, not a silent skip.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

from ccattler.engine.facts import CcaError


class LayerError(CcaError):
    """A layer cannot be unpacked (corrupt, unsupported compression, or escaping the root)."""


_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"


def _inside(root: Path, rel: str) -> Path:
    """The host path for `rel` under `root`; refuse paths whose parents resolve outside root."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise LayerError(f"layer member {rel!r} contains '..'")
    target = root.joinpath(*parts) if parts else root
    parent = target.parent.resolve()
    if parent != root and root not in parent.parents:
        raise LayerError(f"layer member {rel!r} would be written outside the root filesystem")
    return target


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif path.exists() or os.path.lexists(path):
        path.unlink()


def apply_layer(root: Path, layer: Path) -> None:
    """Apply one layer tar (plain or gzip, detected) onto `root`."""
    root = root.resolve()
    try:
        with tarfile.open(layer, mode="r:*") as tar:
            for member in tar:
                _apply_member(root, tar, member)
    except tarfile.ReadError as exc:
        raise LayerError(f"layer {layer.name}: not a tar or gzip stream ({exc}); zstd is not supported") \
            from None
    except (OSError, EOFError, tarfile.TarError) as exc:
        raise LayerError(f"layer {layer.name}: {exc}") from None


def _apply_member(root: Path, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    directory, _, base = member.name.rstrip("/").rpartition("/")
    if base == _OPAQUE:
        folder = _inside(root, directory)
        if folder.is_dir():
            for child in folder.iterdir():
                _remove(child)
        return
    if base.startswith(_WHITEOUT):
        victim = _inside(root, f"{directory}/{base[len(_WHITEOUT):]}")
        if os.path.lexists(victim):
            _remove(victim)
        return
    target = _inside(root, member.name)
    clean = str(target.relative_to(root))
    changes = {"name": clean}
    if member.islnk():  # hard links must point inside the root too
        changes["linkname"] = str(_inside(root, member.linkname).relative_to(root))
    if os.path.lexists(target) and not (member.isdir() and target.is_dir() and not target.is_symlink()):
        _remove(target)
    tar.extract(member.replace(**changes, deep=False), root, set_attrs=True, numeric_owner=True,
                filter="fully_trusted")
