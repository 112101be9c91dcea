"""Autoscaling on a running cluster (issue 18 part 5): `cca up --sim-nodes 2`, and `cca metric set`
drives an event term 3 → 8 *running* instances, the down window holds the count (explain says
so), and after it the cluster is back at 3 running — the same decisions as the node-less test in
tests/cli/test_autoscale_live.py, now followed by agents starting and stopping instances."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

SERVICE = """service web {
    image "busybox"
    instances 3
    resources { cpu 100m  memory 32Mi }
    scale { horizontal { min 3 max 10 event jobs.pending = 10
                         stabilization { scale_up 0s scale_down 4s } } }
}
"""


def test_metric_set_scales_running_instances_out_and_back(shell, tmp_path: Path, port: int, wait) -> None:
    shell.cca("init", "--server", f"127.0.0.1:{port}")
    shell.cca("up", "--detach", "--sim-nodes", "2", "--server", f"127.0.0.1:{port}", "--state-dir",
              str(tmp_path / "state"), "--metrics", "off")
    try:
        (tmp_path / "web.cca").write_text(SERVICE)
        shell.cca("apply", str(tmp_path / "web.cca"), "--wait")

        def running() -> int:
            return sum(1 for i in shell.instances() if i["state"] == "running")

        wait(lambda: running() == 3, "3 running", 60)
        shell.cca("metric", "set", "web", "jobs.pending", "80")
        wait(lambda: running() == 8, "8 running after the event rose to 80", 60)
        assert "8 (autoscaler)" in shell.cca("get", "services").stdout
        shell.cca("metric", "set", "web", "jobs.pending", "0")
        wait(lambda: "held at 8" in shell.cca("explain", "web").stdout, "the down window's hold", 20)
        wait(lambda: running() == 3 and len(shell.instances()) == 3, "back to 3 after the window", 60)
        assert "scaled 8 → 3" in shell.cca("events").stdout
    finally:
        shell.cca("down", check=False, timeout=120)
