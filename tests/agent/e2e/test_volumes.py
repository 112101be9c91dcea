"""Volumes on a real runc node: a file written into a volume survives the container's replacement
(a changed spec), a stateful ordinal has its own directory, the directories stay after removal
unless declared `persistent false`; a size is enforced by a loop-mounted ext4 image (ENOSPC inside
the container); config files are mounted read-only."""

from __future__ import annotations

import random
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from ccattler.agent.images.store import ImageStore
from ccattler.agent.machine import cleanup_node
from ccattler.agent.node import NodeCore
from ccattler.agent.runtime.base import ConfigFile, VolumeMount
from ccattler.agent.runtime.runc import RuncRuntime

pytestmark = pytest.mark.e2e

SLEEP = "exec sleep 600"


def test_volume_survives_replacement(node) -> None:  # noqa: ANN001
    spec = replace(node.spec("db-0", 2, command=SLEEP), volumes=(VolumeMount("default/data/db-0", "/data"),))
    running = lambda observed: all(d["state"] == "running" for d in observed.values())  # noqa: E731
    node.converge({spec.key: spec}, running, timeout=30)
    assert node.runtime.exec(spec.key, ["sh", "-c", "echo kept > /data/file"]).exit_code == 0
    changed = replace(node.spec("db-0", 2, command=SLEEP + " # v2"), volumes=spec.volumes)
    assert changed.spec_hash != spec.spec_hash
    node.converge({changed.key: changed},
                  lambda observed: running(observed) and node.runtime.status(changed.key).spec_hash
                  == changed.spec_hash, timeout=30)
    assert node.runtime.exec(changed.key, ["cat", "/data/file"]).stdout == b"kept\n"
    other = replace(node.spec("db-1", 3, command=SLEEP), volumes=(VolumeMount("default/data/db-1", "/data"),))
    node.converge({changed.key: changed, other.key: other}, running, timeout=30)
    assert node.runtime.exec(other.key, ["ls", "/data"]).stdout == b""  # its own directory
    node.converge({}, lambda observed: not observed, timeout=30)
    assert (node.state / "volumes" / "default" / "data" / "db-0" / "file").read_text() == "kept\n"


def test_volume_paths_are_checked(node) -> None:  # noqa: ANN001
    spec = replace(node.spec("bad-0", 4, command=SLEEP), volumes=(VolumeMount("default/../x", "/data"),))
    observed = node.converge({spec.key: spec}, lambda o: o[spec.observed_key]["state"] == "failed",
                             timeout=30)
    assert "without '..'" in observed[spec.observed_key]["reason"]


def _loops(image: Path) -> str:
    return subprocess.run(["losetup", "-j", str(image)], capture_output=True, text=True).stdout.strip()


def test_size_is_enforced_with_a_loop_mounted_image(node) -> None:  # noqa: ANN001
    if not node.runtime.volumes.enforce:
        pytest.skip("this machine cannot loop-mount ext4 images (root, /dev/loop-control, mkfs.ext4)")
    volume = VolumeMount("default/small", "/data", 8 << 20)
    spec = replace(node.spec("small-0", 5, command=SLEEP), volumes=(volume,))
    node.converge({spec.key: spec}, lambda o: o[spec.observed_key]["state"] == "running", timeout=30)
    fill = node.runtime.exec(spec.key, ["dd", "if=/dev/zero", "of=/data/fill", "bs=1M", "count=9"])
    assert fill.exit_code != 0 and b"No space left on device" in fill.stderr
    [report] = node.runtime.volumes.report([volume])
    assert report["enforced"] and report["size"] == 8 << 20 and report["used"] > 4 << 20
    image = node.state / "volume-meta" / "default" / "small.img"
    assert _loops(image)
    node.reconciler.remove_all()  # node shutdown: unmounted (the loop device freed), data kept
    assert not _loops(image) and image.exists()
    node.converge({spec.key: spec}, lambda o: o[spec.observed_key]["state"] == "running", timeout=30)
    assert node.runtime.exec(spec.key, ["ls", "/data"]).stdout.split() == [b"fill", b"lost+found"]


def test_config_files_are_mounted_read_only(node) -> None:  # noqa: ANN001
    files = (ConfigFile("/etc/app/app.conf", "listen 8080\n"),)
    spec = replace(node.spec("conf-0", 6, command=SLEEP), files=files)
    node.converge({spec.key: spec}, lambda o: o[spec.observed_key]["state"] == "running", timeout=30)
    assert node.runtime.exec(spec.key, ["cat", "/etc/app/app.conf"]).stdout == b"listen 8080\n"
    write = node.runtime.exec(spec.key, ["sh", "-c", "echo changed > /etc/app/app.conf"])
    assert write.exit_code != 0 and b"Read-only file system" in write.stderr
    assert node.runtime.exec(spec.key, ["cat", "/etc/hostname"]).stdout == b"conf-0\n"
    assert node.runtime.exec(spec.key, ["sh", "-c", "echo x >> /etc/hosts"]).exit_code == 0  # still its own


def _db_slice(subnet: str, persistent: bool, placed: bool) -> dict:
    prefix = subnet.rsplit(".", 1)[0]
    facts = {
        "desired/service/default/db": {
            "kind": "service", "tenant": "default", "name": "db", "image": "busybox", "command": SLEEP,
            "env": {}, "config": {"env": {}, "files": []}, "resources": {"cpu": 100, "memory": 32 << 20},
            "stateful": True, "volumes": [{"name": "default/data", "path": "/data"}]},
        "desired/volume/default/data": {"kind": "volume", "tenant": "default", "name": "data",
                                        "size": 16 << 20, "persistent": persistent},
        "derived/network/subnet/n1": {"node": "n1", "subnet": subnet, "gateway": f"{prefix}.1"},
        # what the network-policy controller writes: the agent starts nothing it has not decided
        "derived/firewall/n1": {"node": "n1", "identities": {}, "policies": {}, "open": ["default/db"]},
    }
    if placed:
        facts["derived/placement/default/db-0"] = {"service": "default/db", "instance": "db-0", "node": "n1"}
        facts["derived/network/ip/default/db-0"] = {"node": "n1", "ip": f"{prefix}.2"}
    return facts


@pytest.mark.parametrize("persistent", [False, True])
def test_a_volume_goes_with_its_instance_unless_persistent(busybox_state: Path, tmp_path: Path, clean_check,
                                                           persistent: bool) -> None:
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    bridge = f"cv{random.randrange(16**4):04x}"
    subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}.0/24"

    def core() -> NodeCore:
        runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
        return NodeCore("n1", runtime, state_dir=state, bridge=bridge, stop_timeout=0.5)

    folder = state / "volumes" / "default" / "data" / "db-0"
    first = core()
    try:
        doc = first.apply(_db_slice(subnet, persistent, placed=True))["observed/instance/default/db-0"]
        assert doc["state"] == "running"
        assert doc["volumes"][0]["name"] == "default/data/db-0"
        assert first.runtime.exec("default/db-0", ["sh", "-c", "echo kept > /data/file"]).exit_code == 0
        first.shutdown(remove=True)  # `cca down` or a reboot: unmounted, kept
        second = core()
        doc = second.apply(_db_slice(subnet, persistent, placed=True))["observed/instance/default/db-0"]
        assert doc["state"] == "running"  # its image mounted again
        assert second.runtime.exec("default/db-0", ["cat", "/data/file"]).stdout == b"kept\n"
        assert second.apply(_db_slice(subnet, persistent, placed=False)) == {}
        assert folder.exists() == persistent
        assert (state / "volume-meta" / "default" / "data" / "db-0.img").exists() == (
            persistent and second.runtime.volumes.enforce)
        second.shutdown(remove=True)
    finally:
        cleanup_node(state, "runc", bridge, runc_root=state / "runc")
    clean_check(state, bridge)
