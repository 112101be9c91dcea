"""Autoscaling on real cpu (issue 18): a busy-loop container on runc; its cgroup usage, reported by
the agent's telemetry, drives the cpu term of the autoscaler to scale the service up. Needs root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BUSY = """
service burn {
    image busybox
    command "while :; do :; done"
    instances 1
    resources { cpu 100m  memory 32Mi }
    scale { horizontal { min 1 max 3 target cpu = 50 } }
}
"""


def test_busy_loop_cpu_scales_up(root, shell, node_state: Path, network_names, port: int, wait,
                                 tmp_path: Path) -> None:
    shell.up_local(port, node_state, network_names)
    try:
        app = tmp_path / "burn.cca"
        app.write_text(BUSY)
        shell.cca("apply", str(app))

        def count() -> int:
            return len([i for i in shell.instances() if i["service"] == "default/burn"])

        wait(lambda: any(i["state"] == "running" for i in shell.instances()), "the busy loop to run", 60)
        wait(lambda: count() >= 2, "the cpu term to add instances", 120)
        explained = json.loads(shell.cca("explain", "burn", "-o", "json").stdout)
        scaling = explained["scaling"]
        assert scaling["terms"][0]["term"] == "target cpu"
        assert scaling["desired"] >= 2 and scaling["terms"][0]["observed"] > 50
        services = shell.get("services")
        assert services[0]["autoscaled"] is True
    finally:
        shell.cca("down")
