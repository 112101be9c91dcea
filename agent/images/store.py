"""The local OCI image store: an OCI image layout (blobs by sha256, `index.json` of names) plus
unpacked root filesystems cached per manifest.

The layout lives in `<state>/images` (readable by skopeo as `oci:<state>/images:<name>`); root
filesystems in `<state>/rootfs/<manifest hex>`. Writers hold a file lock, renames are atomic.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ccattler.agent.images.refs import parse_reference
from ccattler.agent.images.unpack import apply_layer
from ccattler.engine.facts import CcaError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
IMAGE_MANIFESTS = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
REF_ANNOTATION = "org.opencontainers.image.ref.name"


class ImageError(CcaError):
    """An image operation failed (unknown name, corrupt blob, unsupported format)."""


class ImageNotFound(ImageError):
    """No image of that name is in the local store."""


@dataclass(frozen=True, slots=True)
class Image:
    """One image in the store: its manifest digest, layers (in order) and runtime config."""

    name: str
    digest: str
    layers: tuple[str, ...]
    config: dict[str, Any]
    size: int

    @property
    def entrypoint(self) -> list[str]:
        cfg = self.config.get("config") or {}
        return list(cfg.get("Entrypoint") or []) + list(cfg.get("Cmd") or [])

    @property
    def env(self) -> dict[str, str]:
        pairs = ((self.config.get("config") or {}).get("Env")) or []
        return dict(p.split("=", 1) for p in pairs if "=" in p)

    @property
    def workdir(self) -> str:
        return (self.config.get("config") or {}).get("WorkingDir") or "/"


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _hex(digest: str) -> str:
    algo, _, value = digest.partition(":")
    if algo != "sha256" or len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ImageError(f"unsupported or malformed digest {digest!r} (only sha256)")
    return value


class ImageStore:
    """An OCI layout at `root/images` with unpacked root filesystems at `root/rootfs`."""

    def __init__(self, state_dir: Path | str):
        self.layout = Path(state_dir) / "images"
        self.rootfs_dir = Path(state_dir) / "rootfs"
        (self.layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        self.rootfs_dir.mkdir(parents=True, exist_ok=True)
        marker = self.layout / "oci-layout"
        if not marker.exists():
            marker.write_text('{"imageLayoutVersion":"1.0.0"}')
        if not (self.layout / "index.json").exists():
            self._write_index({"schemaVersion": 2, "manifests": []})

    # -- blobs ---------------------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        return self.layout / "blobs" / "sha256" / _hex(digest)

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).exists()

    def add_blob(self, data: bytes, expected: str | None = None) -> tuple[str, int]:
        """Store `data`; verify it against `expected` when given. Returns (digest, size)."""
        digest = digest_of(data)
        if expected and expected != digest:
            raise ImageError(f"blob digest mismatch: expected {expected}, got {digest}")
        path = self.blob_path(digest)
        if not path.exists():
            self._atomic_write(path, lambda f: f.write(data))
        return digest, len(data)

    def add_blob_stream(self, stream: IO[bytes], expected: str | None = None) -> tuple[str, int]:
        """Store a blob read from `stream` (hashed while copied); verify against `expected`."""
        fd, tmp = tempfile.mkstemp(dir=self.layout / "blobs", prefix=".tmp-")
        hasher, size = hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := stream.read(1 << 20):
                    hasher.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            digest = "sha256:" + hasher.hexdigest()
            if expected and expected != digest:
                raise ImageError(f"blob digest mismatch: expected {expected}, got {digest}")
            os.replace(tmp, self.blob_path(digest))
            return digest, size
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def read_blob(self, digest: str) -> bytes:
        try:
            data = self.blob_path(digest).read_bytes()
        except FileNotFoundError:
            raise ImageError(f"blob {digest} is missing from the image store") from None
        if digest_of(data) != digest:
            raise ImageError(f"blob {digest} is corrupt (its content does not match its digest)")
        return data

    def read_json(self, digest: str) -> dict[str, Any]:
        try:
            return json.loads(self.read_blob(digest))
        except json.JSONDecodeError as exc:
            raise ImageError(f"blob {digest} is not JSON: {exc}") from None

    # -- names ---------------------------------------------------------------------------------
    def tag(self, name: str, manifest_digest: str) -> str:
        """Point `name` (normalised) at a stored image manifest; returns the normalised name."""
        ref = parse_reference(name).name
        manifest = self.read_json(manifest_digest)
        media = manifest.get("mediaType") or OCI_MANIFEST
        if media not in IMAGE_MANIFESTS:
            raise ImageError(f"{manifest_digest} is a {media}, not an image manifest")
        for blob in [manifest["config"], *manifest.get("layers", [])]:
            if not self.has_blob(blob["digest"]):
                raise ImageError(f"image {ref}: blob {blob['digest']} is missing")
        entry = {"mediaType": media, "digest": manifest_digest,
                 "size": self.blob_path(manifest_digest).stat().st_size,
                 "annotations": {REF_ANNOTATION: ref}}
        with self._locked():
            index = self._read_index()
            index["manifests"] = [m for m in index["manifests"] if _ref_of(m) != ref] + [entry]
            self._write_index(index)
        return ref

    def untag(self, name: str) -> None:
        ref = parse_reference(name).name
        with self._locked():
            index = self._read_index()
            kept = [m for m in index["manifests"] if _ref_of(m) != ref]
            if len(kept) == len(index["manifests"]):
                raise ImageNotFound(f"image {ref} is not in the local store")
            index["manifests"] = kept
            self._write_index(index)

    def names(self) -> dict[str, str]:
        """name → manifest digest for every image in the store."""
        return {_ref_of(m): m["digest"] for m in self._read_index()["manifests"] if _ref_of(m)}

    def resolve(self, name: str) -> Image:
        """The image `name` refers to (a name in the store, or `…@sha256:` of a stored manifest)."""
        ref = parse_reference(name)
        digest = self.names().get(ref.name)
        if digest is None and ref.digest and self.has_blob(ref.digest):
            digest = ref.digest
        if digest is None:
            raise ImageNotFound(
                f"image {ref.name} is not in the local store (cca image list shows what is; "
                "cca image pull or cca image import adds one)"
            )
        manifest = self.read_json(digest)
        config = self.read_json(manifest["config"]["digest"])
        layers = tuple(layer["digest"] for layer in manifest.get("layers", []))
        size = sum(int(layer.get("size", 0)) for layer in manifest.get("layers", []))
        return Image(ref.name, digest, layers, config, size)

    def list(self) -> list[Image]:
        return [self.resolve(name) for name in sorted(self.names())]

    # -- root filesystems ----------------------------------------------------------------------
    def rootfs(self, name: str) -> Path:
        """The unpacked root filesystem of `name` (unpacked once per manifest, then reused)."""
        image = self.resolve(name)
        target = self.rootfs_dir / _hex(image.digest)
        if target.is_dir():
            return target
        tmp = Path(tempfile.mkdtemp(dir=self.rootfs_dir, prefix=".unpack-"))
        try:
            for layer in image.layers:
                apply_layer(tmp, self.blob_path(layer))
            os.chmod(tmp, 0o755)
            try:
                os.rename(tmp, target)
            except OSError:  # another process unpacked it first
                if not target.is_dir():
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return target

    def prune_rootfs(self) -> int:
        """Delete unpacked root filesystems no name points at; returns how many."""
        live = {_hex(d) for d in self.names().values()}
        gone = 0
        for path in self.rootfs_dir.iterdir():
            if path.name not in live:
                shutil.rmtree(path, ignore_errors=True)
                gone += 1
        return gone

    def prune(self) -> tuple[int, int]:
        """Delete blobs no name reaches (and unpacked root filesystems); returns (blobs, bytes) freed."""
        with self._locked():
            keep: set[str] = set()
            for digest in self.names().values():
                keep.add(digest)
                manifest = self.read_json(digest)
                keep.update(b["digest"] for b in [manifest["config"], *manifest.get("layers", [])])
            freed = count = 0
            for path in (self.layout / "blobs" / "sha256").iterdir():
                if f"sha256:{path.name}" not in keep:
                    freed += path.stat().st_size
                    path.unlink()
                    count += 1
        self.prune_rootfs()
        return count, freed

    # -- internals -----------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.layout / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _read_index(self) -> dict[str, Any]:
        try:
            return json.loads((self.layout / "index.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ImageError(f"image index {self.layout / 'index.json'} is unreadable: {exc}") from None

    def _write_index(self, index: dict[str, Any]) -> None:
        data = json.dumps(index, indent=1).encode()
        self._atomic_write(self.layout / "index.json", lambda f: f.write(data))

    @staticmethod
    def _atomic_write(path: Path, write: Any) -> None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                write(out)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _ref_of(entry: dict[str, Any]) -> str | None:
    return (entry.get("annotations") or {}).get(REF_ANNOTATION)
