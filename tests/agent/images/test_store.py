"""The image store: blobs by digest, names, root filesystems, and layer unpacking rules."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from ccattler.agent.images.busybox import build_busybox
from ccattler.agent.images.store import ImageError, ImageNotFound, ImageStore
from ccattler.agent.images.unpack import LayerError, apply_layer


def test_busybox_image_is_reproducible_and_complete(store: ImageStore, tmp_path: Path) -> None:
    again = build_busybox(ImageStore(tmp_path / "other"))
    assert store.resolve("busybox").digest == again.digest
    root = store.rootfs("busybox")
    assert os.readlink(root / "bin" / "sh") == "/bin/busybox"
    assert os.readlink(root / "usr" / "sbin" / "httpd") == "/bin/busybox"
    assert (root / "tmp").stat().st_mode & 0o1777 == 0o1777
    assert store.resolve("busybox:latest").entrypoint == ["sh"]


def test_names_resolve_and_untag(store: ImageStore) -> None:
    digest = store.resolve("busybox").digest
    store.tag("example.com/tools/busybox:1", digest)
    assert set(store.names()) == {"busybox:latest", "example.com/tools/busybox:1"}
    assert store.resolve(f"busybox@{digest}").digest == digest
    store.untag("busybox")
    with pytest.raises(ImageNotFound, match="busybox:latest is not in the local store"):
        store.resolve("busybox")


def test_corrupt_blob_is_detected(store: ImageStore) -> None:
    image = store.resolve("busybox")
    store.blob_path(image.digest).write_bytes(b"{}")
    with pytest.raises(ImageError, match="corrupt"):
        store.resolve("busybox")


def test_blob_digest_is_verified(store: ImageStore) -> None:
    with pytest.raises(ImageError, match="digest mismatch"):
        store.add_blob(b"data", expected="sha256:" + "0" * 64)


def _layer(path: Path, entries: list[tuple[str, str, str | None]]) -> Path:
    """Write a layer tar of (name, type, content-or-link) entries: type is file, dir or symlink."""
    with tarfile.open(path, "w") as tar:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, data or ""
                tar.addfile(info)
            else:
                raw = (data or "").encode()
                info.size = len(raw)
                tar.addfile(info, io.BytesIO(raw))
    return path


def test_whiteouts_remove_lower_files_and_opaque_dirs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    apply_layer(root, _layer(tmp_path / "l1.tar", [("etc", "dir", None), ("etc/a", "file", "1"),
                                                    ("etc/b", "file", "2"), ("opt", "dir", None),
                                                    ("opt/x", "file", "x")]))
    upper = [("etc/.wh.a", "file", ""), ("opt/.wh..wh..opq", "file", ""), ("opt/y", "file", "y")]
    apply_layer(root, _layer(tmp_path / "l2.tar", upper))
    assert sorted(p.name for p in (root / "etc").iterdir()) == ["b"]
    assert sorted(p.name for p in (root / "opt").iterdir()) == ["y"]


@pytest.mark.parametrize(
    "entries",
    [
        pytest.param([("../evil", "file", "x")], id="dotdot"),
        pytest.param([("link", "symlink", "/tmp"), ("link/evil", "file", "x")], id="through-symlink"),
    ],
)
def test_layers_cannot_write_outside_the_root(tmp_path: Path, entries: list) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(LayerError, match="contains '..'|outside the root"):
        apply_layer(root, _layer(tmp_path / "bad.tar", entries))
    assert not (tmp_path / "evil").exists() and not Path("/tmp/evil").exists()


def test_absolute_member_names_land_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    apply_layer(root, _layer(tmp_path / "abs.tar", [("/etc", "dir", None), ("/etc/motd", "file", "hi")]))
    assert (root / "etc" / "motd").read_text() == "hi"


def test_not_a_tar_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "layer"
    bad.write_bytes(b"\x28\xb5\x2f\xfd" + b"0" * 600)  # zstd magic
    with pytest.raises(LayerError, match="not a tar or gzip stream"):
        apply_layer(tmp_path, bad)


def test_prune_keeps_what_names_reach(store: ImageStore) -> None:
    image = store.resolve("busybox")
    stray, _ = store.add_blob(b"not referenced")
    store.rootfs("busybox")
    assert store.prune() == (1, len(b"not referenced"))
    assert not store.has_blob(stray) and store.has_blob(image.layers[0])
    assert store.rootfs_dir.joinpath(image.digest.split(":")[1]).is_dir()
    store.untag("busybox")
    count, _ = store.prune()
    assert count == 3 and list(store.rootfs_dir.iterdir()) == []
