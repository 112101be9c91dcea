"""Autoscaling live (issue 18): a real server and runner; `cca metric set` drives an event term
3 → 8 instances, the down window holds (explain says so), and after it the count goes back to 3.
No agents: the event term needs none (cpu on runc is not covered here)."""

from __future__ import annotations

import json
import time

SERVICE = """service web {
    image "busybox"
    instances 3
    scale { horizontal { min 3 max 10 event jobs.pending = 10
                         stabilization { scale_up 0s scale_down 4s } } }
}
"""


def _until(check, what: str, timeout: float = 30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _service(cluster) -> dict:
    result = cluster.cca("get", "services", "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)[0]


def test_metric_set_scales_up_holds_and_comes_back(cli_cluster_with_runner, tmp_path):
    cluster = cli_cluster_with_runner
    (tmp_path / "web.cca").write_text(SERVICE)
    assert cluster.cca("apply", str(tmp_path / "web.cca")).exit_code == 0
    _until(lambda: _service(cluster)["scheduled"] == 3, "3 instances")

    assert cluster.cca("metric", "set", "web", "jobs.pending", "80").exit_code == 0
    row = _until(lambda: (r := _service(cluster))["scheduled"] == 8 and r, "8 instances")
    assert row["desired"] == 8 and row["autoscaled"] is True
    table = cluster.cca("get", "services").output
    assert "8 (autoscaler)" in table

    assert cluster.cca("metric", "set", "web", "jobs.pending", "0").exit_code == 0
    explained = _until(lambda: "held at 8" in (out := cluster.cca("explain", "web").output) and out,
                       "the hold", timeout=10)
    assert "event jobs.pending: observed 0" in explained and "winning term: event jobs.pending" in explained
    assert _service(cluster)["scheduled"] == 8

    time.sleep(4.5)  # the down window passes; the next sample lets the autoscaler decide again
    assert cluster.cca("metric", "set", "web", "jobs.pending", "0").exit_code == 0
    _until(lambda: _service(cluster)["scheduled"] == 3, "back to 3")
    as_json = json.loads(cluster.cca("explain", "web", "-o", "json").output)
    assert as_json["scaling"]["desired"] == 3 and as_json["scaling"]["clamp"] == "raised to min 3"
    events = json.loads(cluster.cca("get", "events", "-o", "json").output)
    reasons = [e["reason"] for e in events if e["reason"]]
    assert reasons[0].startswith("scaled 3 → 8: event jobs.pending recommends 8")
    assert reasons[-1].startswith("scaled 8 → 3")
