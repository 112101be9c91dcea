"""Drain and rebalancing on a running cluster, as a user does them (issue 17 parts 2 and 3):
`cca up --sim-nodes 3`, six replicas with `disruption { min_available 5 }`; `cca drain sim-1`
empties the node while every observation of the cluster keeps at least five ready; `cca
enable-node` ends the drain and the rebalancer moves instances back (at most two a cycle), which
`cca explain` names with their gains — the floor holding throughout; a node that then joins
(its own `cca agent` with a join token) receives instances the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.sampling import Sampler

pytestmark = pytest.mark.e2e

SERVICE = """service web {
    image "busybox"
    instances 6
    resources { cpu 1  memory 64Mi }
    disruption { min_available 5 }
}
"""


class Recorder(Sampler):
    """Polls the instances on a thread: the fewest ready replicas and most instances seen."""

    def __init__(self, shell) -> None:  # noqa: ANN001
        super().__init__()
        self.shell, self.fewest_ready, self.most = shell, None, 0

    def sample(self) -> None:
        rows = [r for r in self.shell.instances() if r.get("service") in ("web", "default/web")]
        ready = sum(1 for r in rows if r.get("state") == "running" and r.get("ready") is not False)
        self.fewest_ready = ready if self.fewest_ready is None else min(self.fewest_ready, ready)
        self.most = max(self.most, len(rows))


def on(shell, node: str) -> list[dict]:  # noqa: ANN001
    return [r for r in shell.instances() if r.get("node") == node and r.get("state") == "running"]


def test_drain_keeps_the_floor_and_rebalancing_refills_the_node(shell, tmp_path: Path, port: int, wait):
    state = tmp_path / "state"
    shell.cca("init", "--server", f"127.0.0.1:{port}")
    shell.cca("up", "--detach", "--sim-nodes", "3", "--server", f"127.0.0.1:{port}", "--state-dir",
              str(state), "--metrics", "off", "--rebalance-interval", "2")
    joined = None
    try:
        (tmp_path / "web.cca").write_text(SERVICE)
        shell.cca("apply", str(tmp_path / "web.cca"), "--wait")
        wait(lambda: len([r for r in shell.instances() if r.get("state") == "running"]) == 6, "6 running", 60)
        assert on(shell, "sim-1"), "the placement spread nothing onto sim-1"

        with Recorder(shell) as recorded:
            shell.cca("drain", "sim-1", "--wait", timeout=180)
            wait(lambda: len([r for r in shell.instances() if r.get("state") == "running"]) == 6,
                 "6 running elsewhere", 60)
        assert not on(shell, "sim-1")
        assert recorded.fewest_ready is not None and recorded.fewest_ready >= 5, recorded.fewest_ready
        assert recorded.most <= 7, recorded.most  # instances + max_extra (1 by default)
        nodes = {r["name"]: r for r in shell.get("nodes")}
        assert "drained" in str(nodes["sim-1"]).lower(), nodes["sim-1"]

        with Recorder(shell) as recorded:
            shell.cca("enable-node", "sim-1")
            wait(lambda: on(shell, "sim-1"), "rebalancing to move instances back to sim-1", 90)
        assert recorded.fewest_ready >= 5 and recorded.most <= 7, (recorded.fewest_ready, recorded.most)
        explained = shell.cca("explain", "web").stdout
        assert "rebalancing: moved at" in explained and "→ sim-1" in explained, explained

        # a node that joins (its own agent, with a join token) receives instances the same way
        token = shell.cca("token", "create", "--ttl", "5m").stdout.strip()
        joined = shell.spawn("sim-4", "agent", "--runtime", "sim", "--node-id", "sim-4", "--token", token,
                             "--tick", "0.5", "--state-dir", str(tmp_path / "sim-4"))
        with Recorder(shell) as recorded:
            wait(lambda: on(shell, "sim-4"), "rebalancing to move instances onto the joined sim-4", 90)
        assert recorded.fewest_ready >= 5 and recorded.most <= 7, (recorded.fewest_ready, recorded.most)
        assert "→ sim-4" in shell.cca("explain", "web").stdout
    finally:
        if joined is not None:
            joined.terminate()
            joined.wait(30)
        shell.cca("down", check=False, timeout=120)
