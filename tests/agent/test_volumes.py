"""Volume directories without mounts (the process runtime's way, and any node without loop devices):
made on first use with a record, reported against their size, deleted with their last instance
when declared `persistent false`, kept when persistent or when the declaration is unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccattler.agent.desired import desired_instances
from ccattler.agent.node import NodeCore
from ccattler.agent.reconcile import Backoff
from ccattler.agent.runtime.base import ContainerError, VolumeMount
from ccattler.agent.runtime.process import ProcessRuntime
from ccattler.agent.runtime.volumes import NodeVolumes


def volume_doc(persistent: bool, size: int | None = None) -> dict:
    return {"kind": "volume", "tenant": "default", "name": "data", "source": "x.cca", "size": size,
            "persistent": persistent}


def slice_for(*instances: str, persistent: bool | None, stateful: bool = False,
              size: int | None = None) -> dict:
    facts: dict = {"desired/service/default/db": {
        "kind": "service", "tenant": "default", "name": "db", "image": "busybox", "command": "exec sleep 30",
        "env": {}, "config": {"env": {}, "files": [{"path": "/etc/db.conf", "content": "x=1\n"}]},
        "resources": {}, "stateful": stateful, "volumes": [{"name": "default/data", "path": "/data"}]}}
    if persistent is not None:
        facts["desired/volume/default/data"] = volume_doc(persistent, size)
    for name in instances:
        facts[f"derived/placement/default/{name}"] = {"service": "default/db", "instance": name, "node": "n1"}
    return facts


def test_the_size_comes_from_the_declaration() -> None:
    facts = slice_for("db-0", persistent=True, stateful=True, size=1 << 20)
    spec = desired_instances(facts, "n1")["default/db-0"]
    assert spec.volumes == (VolumeMount("default/data/db-0", "/data", 1 << 20),)
    unknown = desired_instances(slice_for("db-0", persistent=None), "n1")["default/db-0"]
    assert unknown.volumes == (VolumeMount("default/data", "/data", None),)


def test_usage_is_measured_and_reported_against_the_size(tmp_path: Path) -> None:
    volumes = NodeVolumes(tmp_path, enforce=False)
    volume = VolumeMount("default/my.vol", "/data", 4096)
    host = volumes.prepare(volume)
    assert host == tmp_path / "volumes" / "default" / "my.vol" and volumes.keys() == ["default/my.vol"]
    (host / "big").write_bytes(b"x" * 100_000)
    [report] = volumes.report([volume])
    assert report["name"] == "default/my.vol" and report["size"] == 4096 and report["enforced"] is False
    assert report["used"] >= 100_000


def test_bad_volume_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ContainerError, match="without '..'"):
        NodeVolumes(tmp_path, enforce=False).prepare(VolumeMount("default/../x", "/data"))


def test_collect_deletes_only_unused_non_persistent_volumes(tmp_path: Path) -> None:
    volumes = NodeVolumes(tmp_path, enforce=False)
    for key in ("default/data/db-0", "default/data/db-1", "default/keep", "default/unknown"):
        (volumes.prepare(VolumeMount(key, "/data")) / "file").write_text("x")
    declared = {"default/data": volume_doc(False), "default/keep": volume_doc(True)}
    assert volumes.collect(set(), declared, idle=lambda: False) == []  # a container may still hold one
    assert volumes.collect({"default/data/db-0"}, declared) == ["default/data/db-1"]
    assert not (tmp_path / "volumes" / "default" / "data" / "db-1").exists()
    assert volumes.collect(set(), declared) == ["default/data/db-0"]
    assert not (tmp_path / "volumes" / "default" / "data").exists()  # the ordinals' parent went too
    assert volumes.keys() == ["default/keep", "default/unknown"]
    assert (tmp_path / "volumes" / "default" / "unknown" / "file").exists()  # no declaration: kept


@pytest.mark.parametrize("persistent", [False, True, None])
def test_a_volume_goes_with_its_last_instance_unless_persistent(tmp_path: Path,
                                                                persistent: bool | None) -> None:
    core = NodeCore("n1", ProcessRuntime(tmp_path), state_dir=tmp_path, backoff=Backoff(initial=0.1))
    folder = tmp_path / "volumes" / "default" / "data"
    try:
        observed = core.apply(slice_for("db-a", "db-b", persistent=persistent, size=1 << 30))
        assert observed["observed/instance/default/db-a"]["state"] == "running"
        (folder / "file").write_text("kept?")
        [report] = observed["observed/instance/default/db-a"]["volumes"]
        size = None if persistent is None else 1 << 30  # unknown declaration: no size
        assert report == {"name": "default/data", "path": "/data", "size": size, "used": report["used"],
                          "enforced": False}
        assert core.runtime.exec("default/db-a", ["cat", "data/file"]).stdout == b"kept?"
        assert core.runtime.exec("default/db-a", ["cat", "etc/db.conf"]).stdout == b"x=1\n"
        core.apply(slice_for("db-a", persistent=persistent))
        assert (folder / "file").exists()  # db-a still uses it
        assert core.apply(slice_for(persistent=persistent)) == {}
        assert (folder / "file").exists() == (persistent is not False)
    finally:
        core.shutdown(remove=True)


def test_a_shared_directory_holding_ordinals_waits_for_them(tmp_path: Path) -> None:
    volumes = NodeVolumes(tmp_path, enforce=False)  # one volume used by a stateful and a plain service
    volumes.prepare(VolumeMount("default/data", "/data"))
    (volumes.prepare(VolumeMount("default/data/db-0", "/data")) / "file").write_text("x")
    declared = {"default/data": volume_doc(False)}
    assert volumes.collect({"default/data/db-0"}, declared) == []
    assert (tmp_path / "volumes" / "default" / "data" / "db-0" / "file").exists()
    assert volumes.collect(set(), declared) == ["default/data/db-0"]
    assert volumes.collect(set(), declared) == ["default/data"]
    assert NodeVolumes(tmp_path, enforce=False).keys() == []  # the records went too
