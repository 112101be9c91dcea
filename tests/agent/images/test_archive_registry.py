"""Import (oci-archive, docker-archive made by skopeo) and pull from a real registry on loopback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ccattler.agent.images.archive import import_archive
from ccattler.agent.images.registry import RegistryError, pull
from ccattler.agent.images.store import (
    OCI_CONFIG,
    OCI_INDEX,
    OCI_MANIFEST,
    REF_ANNOTATION,
    ImageError,
    ImageStore,
)
from ccattler.cli.main import app


def _skopeo(source: str, dest: str) -> None:
    subprocess.run(["skopeo", "--insecure-policy", "copy", "-q", source, dest], check=True,
                   capture_output=True, timeout=60)


@pytest.mark.parametrize("transport", ["oci-archive", "docker-archive"])
def test_import_archive(store: ImageStore, tmp_path: Path, transport: str) -> None:
    archive = tmp_path / "busybox.tar"
    _skopeo(f"oci:{store.layout}:busybox:latest", f"{transport}:{archive}:example.com/tools/busybox:1.0")
    fresh = ImageStore(tmp_path / "fresh")
    assert import_archive(fresh, archive) == ["example.com/tools/busybox:1.0"]
    image = fresh.resolve("example.com/tools/busybox:1.0")
    assert (fresh.rootfs(image.name) / "bin" / "busybox").is_file()
    assert image.entrypoint == ["sh"]


def test_import_names_an_unnamed_image_and_rejects_junk(store: ImageStore, tmp_path: Path) -> None:
    archive = tmp_path / "busybox.tar"
    _skopeo(f"oci:{store.layout}:busybox:latest", f"oci-archive:{archive}")
    fresh = ImageStore(tmp_path / "fresh")
    with pytest.raises(ImageError, match="has no name in the archive; give one with --name"):
        import_archive(fresh, archive)
    assert import_archive(fresh, archive, name="mybox:2") == ["mybox:2"]
    junk = tmp_path / "junk.tar"
    subprocess.run(["tar", "-cf", str(junk), "-C", str(tmp_path), "fresh/images/oci-layout"], check=True)
    with pytest.raises(ImageError, match="neither an OCI layout"):
        import_archive(fresh, junk)


def test_cli_import_and_list(store: ImageStore, tmp_path: Path) -> None:
    archive = tmp_path / "busybox.tar"
    _skopeo(f"oci:{store.layout}:busybox:latest", f"docker-archive:{archive}:busybox:7")
    state = tmp_path / "cli-state"
    runner = CliRunner()
    result = runner.invoke(app, ["image", "import", str(archive), "--state-dir", str(state)])
    assert result.exit_code == 0, result.output
    assert "imported busybox:7" in result.output
    listed = runner.invoke(app, ["image", "list", "--state-dir", str(state), "-o", "json"])
    assert [row["name"] for row in json.loads(listed.output)] == ["busybox:7"]


def test_pull_from_a_loopback_registry(store: ImageStore, registry, tmp_path: Path) -> None:
    registry.push(f"oci:{store.layout}:busybox:latest", "tools/busybox:1.0")
    fresh = ImageStore(tmp_path / "fresh")
    image = pull(fresh, f"{registry.host}/tools/busybox:1.0")
    assert image.name == f"{registry.host}/tools/busybox:1.0"
    assert image.layers == store.resolve("busybox").layers
    assert (fresh.rootfs(image.name) / "bin" / "busybox").is_file()
    by_digest = pull(ImageStore(tmp_path / "third"), f"{registry.host}/tools/busybox@{image.digest}")
    assert by_digest.digest == image.digest


def test_pull_picks_this_platform_from_an_index(store: ImageStore, registry, tmp_path: Path) -> None:
    amd64 = store.resolve("busybox")
    manifest = store.read_json(amd64.digest)
    config = dict(amd64.config, architecture="arm64")
    config_digest, config_size = store.add_blob(json.dumps(config).encode())
    arm = dict(manifest, config={"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size})
    arm_digest, arm_size = store.add_blob(json.dumps(arm).encode())
    amd_size = store.blob_path(amd64.digest).stat().st_size
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": arm_digest, "size": arm_size,
         "platform": {"os": "linux", "architecture": "arm64"}},
        {"mediaType": OCI_MANIFEST, "digest": amd64.digest, "size": amd_size,
         "platform": {"os": "linux", "architecture": "amd64"}}]}
    index_digest, index_size = store.add_blob(json.dumps(index).encode())
    layout = json.loads((store.layout / "index.json").read_text())
    layout["manifests"].append({"mediaType": OCI_INDEX, "digest": index_digest, "size": index_size,
                                "annotations": {REF_ANNOTATION: "multi:1"}})
    (store.layout / "index.json").write_text(json.dumps(layout))
    registry.push(f"oci:{store.layout}:multi:1", "tools/multi:1", "--all")
    image = pull(ImageStore(tmp_path / "fresh"), f"{registry.host}/tools/multi:1")
    assert image.digest == amd64.digest
    with pytest.raises(ImageError, match=r"has no linux/s390x image \(it offers linux/arm64, linux/amd64\)"):
        pull(ImageStore(tmp_path / "other"), f"{registry.host}/tools/multi:1", platform=("linux", "s390x"))


def test_pull_errors_say_what_went_wrong(registry, tmp_path: Path) -> None:
    fresh = ImageStore(tmp_path / "fresh")
    with pytest.raises(RegistryError, match="HTTP 404 MANIFEST_UNKNOWN"):
        pull(fresh, f"{registry.host}/tools/absent:1")
    with pytest.raises(RegistryError, match="cannot reach registry http://127.0.0.1:1: .*refused"):
        pull(fresh, "127.0.0.1:1/tools/absent:1")
    assert fresh.names() == {}


def test_cli_pull_rm_and_prune(store: ImageStore, registry, tmp_path: Path) -> None:
    registry.push(f"oci:{store.layout}:busybox:latest", "tools/busybox:1.0")
    state = str(tmp_path / "cli-state")
    runner = CliRunner()
    pulled = runner.invoke(app, ["image", "pull", f"{registry.host}/tools/busybox:1.0", "--state-dir", state])
    assert pulled.exit_code == 0, pulled.output
    assert pulled.output.startswith(f"pulled {registry.host}/tools/busybox:1.0 sha256:")
    assert runner.invoke(app, ["image", "rm", f"{registry.host}/tools/busybox:1.0", "--state-dir", state]
                         ).exit_code == 0
    pruned = runner.invoke(app, ["image", "prune", "--state-dir", state])
    assert pruned.output.startswith("deleted 3 blobs")
