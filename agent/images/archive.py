"""Importing image archives into the local store: OCI layouts (`oci-archive`, `docker save` of
Docker 25+) and classic docker-archives (`manifest.json` + `layer.tar`s). Every blob is verified
against its digest as it is copied; an archive that fails verification adds no name.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from ccattler.agent.images.platform import choose_manifest
from ccattler.agent.images.refs import InvalidReference, parse_reference
from ccattler.agent.images.store import (
    INDEX_TYPES,
    OCI_CONFIG,
    OCI_LAYER,
    OCI_LAYER_GZIP,
    OCI_MANIFEST,
    REF_ANNOTATION,
    ImageError,
    ImageStore,
)


def import_archive(store: ImageStore, path: Path | str, name: str | None = None) -> list[str]:
    """Import the images of the tar at `path`; returns the names now in the store.

    `name` names the image when the archive holds one image without a usable name (or renames it).
    """
    path = Path(path)
    if name is not None:
        parse_reference(name)
    try:
        with tarfile.open(path, mode="r:*") as tar:
            members = {m.name.lstrip("./"): m for m in tar.getmembers() if m.isfile()}
            if "oci-layout" in members and "index.json" in members:
                found = _import_oci(store, tar, members)
            elif "manifest.json" in members:
                found = _import_docker(store, tar, members)
            else:
                raise ImageError(f"{path}: neither an OCI layout (oci-layout, index.json) "
                                 "nor a docker-archive (manifest.json)")
    except FileNotFoundError:
        raise ImageError(f"{path}: no such file") from None
    except (tarfile.TarError, EOFError) as exc:
        raise ImageError(f"{path}: not a readable tar archive ({exc})") from None
    if not found:
        raise ImageError(f"{path}: the archive holds no image")
    if name is not None:
        if len(found) > 1:
            raise ImageError(f"{path} holds {len(found)} images; --name needs exactly one")
        return [store.tag(name, found[0][1])]
    names = []
    for ref_name, digest in found:
        if ref_name is None:
            raise ImageError(f"{path}: image {digest[:19]} has no name in the archive; give one with --name")
        names.append(store.tag(ref_name, digest))
    return names


def _read(tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo], name: str) -> bytes:
    member = members.get(name)
    stream = tar.extractfile(member) if member else None
    if stream is None:
        raise ImageError(f"archive member {name} is missing")
    return stream.read()


def _usable_name(text: str | None) -> str | None:
    """An archive's ref name, when it is a full image name (OCI layouts often hold a bare tag)."""
    if not text or ":" not in text and "/" not in text:
        return None
    try:
        return parse_reference(text).name
    except InvalidReference:
        return None


def _import_oci(store: ImageStore, tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo]) -> list:
    for member_name, member in members.items():
        if member_name.startswith("blobs/sha256/"):
            stream = tar.extractfile(member)
            assert stream is not None
            store.add_blob_stream(stream, expected="sha256:" + member_name.rsplit("/", 1)[1])
    index = json.loads(_read(tar, members, "index.json"))
    found = []
    for descriptor in index.get("manifests", []):
        digest = descriptor["digest"]
        if descriptor.get("mediaType") in INDEX_TYPES:
            digest = choose_manifest(store.read_json(digest), f"archive entry {digest[:19]}")["digest"]
        ref_name = _usable_name((descriptor.get("annotations") or {}).get(REF_ANNOTATION))
        found.append((ref_name, digest))
    return found


def _import_docker(store: ImageStore, tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo]) -> list:
    found = []
    for entry in json.loads(_read(tar, members, "manifest.json")):
        config_digest, config_size = store.add_blob(_read(tar, members, entry["Config"]))
        layers: list[dict[str, Any]] = []
        for layer_name in entry["Layers"]:
            member = members.get(layer_name)
            stream = tar.extractfile(member) if member else None
            if stream is None:
                raise ImageError(f"archive member {layer_name} is missing")
            gzipped = stream.read(2) == b"\x1f\x8b"
            stream.seek(0)
            digest, size = store.add_blob_stream(stream)
            media = OCI_LAYER_GZIP if gzipped else OCI_LAYER
            layers.append({"mediaType": media, "digest": digest, "size": size})
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                    "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size},
                    "layers": layers}
        manifest_digest, _ = store.add_blob(json.dumps(manifest, sort_keys=True).encode())
        tags = entry.get("RepoTags") or [None]
        found.extend((_usable_name(tag), manifest_digest) for tag in tags)
    return found
