"""Node failure through the real processes: a `cca server` and two `cca agent --runtime sim` nodes
that join with tokens; one agent is killed (no clean shutdown), its lease expires, the node is
marked down and its instances run on the other node."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ccattler.engine.facts import CcaError

pytestmark = pytest.mark.e2e

SERVICE = """service web {
    image busybox
    instances 4
    resources { cpu 100m  memory 64Mi }
}
"""


def conditions(shell) -> dict[str, str]:  # noqa: ANN001
    return {row["name"]: row["condition"] for row in shell.get("nodes")}


def _answers(shell) -> bool:  # noqa: ANN001
    try:
        shell.get("nodes")
        return True
    except CcaError:
        return False


def test_killed_agent_lease_expires_and_instances_move(shell, port: int, wait, tmp_path: Path) -> None:
    shell.cca("init", "--server", f"127.0.0.1:{port}")
    processes = {"server": shell.spawn("server", "server", "--store", f"sqlite://{tmp_path}/state.db",
                                       "--metrics", "off")}
    try:
        wait(lambda: _answers(shell), "the server", 60)
        for node in ("a", "b"):
            token = shell.cca("token", "create", "--ttl", "5m").stdout.strip()
            processes[node] = shell.spawn(node, "agent", "--runtime", "sim", "--node-id", node,
                                          "--token", token, "--ttl", "3", "--tick", "0.5",
                                          "--state-dir", str(tmp_path / node))
        wait(lambda: conditions(shell) == {"a": "ready", "b": "ready"}, "both nodes ready", 60)
        (tmp_path / "web.cca").write_text(SERVICE)
        shell.cca("apply", str(tmp_path / "web.cca"), "--wait", "--timeout", "60")
        before = shell.instances()
        victim = max(("a", "b"), key=lambda n: sum(i["node"] == n for i in before))
        survivor = "b" if victim == "a" else "a"
        processes[victim].kill()  # no clean shutdown: the lease has to expire
        processes[victim].wait()

        def all_on_survivor() -> bool:
            now = shell.instances()
            return len(now) == 4 and all(i["node"] == survivor and i["state"] == "running" for i in now)

        wait(all_on_survivor, f"the instances of {victim} to run on {survivor}", 60)
        nodes = conditions(shell)
        assert nodes.get(survivor) == "ready" and nodes.get(victim, "down") == "down", nodes

        (tmp_path / "huge.cca").write_text(SERVICE.replace("web", "huge").replace("64Mi", "1Ti"))
        late = shell.cca("apply", str(tmp_path / "huge.cca"), "--wait", "--timeout", "2", check=False)
        assert late.returncode == 1 and "timed out after 2s waiting for huge" in late.stderr, late.stderr
        assert late.stderr.count(": not placed (") == 4 and "memory" in late.stderr, late.stderr
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
