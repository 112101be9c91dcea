"""Volumes on a real runc node: a file written into a volume survives the container's replacement
(a changed spec), a stateful ordinal has its own directory, and the directories stay after removal."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ccattler.agent.runtime.base import VolumeMount

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
