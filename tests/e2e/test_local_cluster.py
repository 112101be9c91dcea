"""The README's main job, as a user runs it: `cca up --detach` (server + runc agent), apply
examples/hello.cca with `--wait`, each busybox web server answers at its own address, a killed
container is restarted, scaling down removes a container and its network devices, and `cca down`
leaves no container, link, namespace, mount, nft table or process behind."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from ccattler.agent.net import nat
from ccattler.agent.runtime.base import container_id

pytestmark = pytest.mark.e2e

HELLO = Path(__file__).parents[2] / "examples" / "hello.cca"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def answer(ip: str) -> str | None:
    try:
        with _DIRECT.open(f"http://{ip}:8080/", timeout=2) as response:
            return response.read().decode()
    except OSError:
        return None


def netns_of(bridge: str, instance: str) -> str:
    """The network namespace the node network gives `default/<instance>` (agent/net/node.py)."""
    return f"{bridge}-{hashlib.sha256(f'{bridge}/default/{instance}'.encode()).hexdigest()[:12]}"


def runc_ids(runc_root: Path) -> set[str]:
    listed = subprocess.run(["runc", "--root", str(runc_root), "list", "-q"], capture_output=True, text=True)
    return set(listed.stdout.split())


def links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout


def alive(pid: int) -> bool:
    """Running or sleeping; an exited child not yet reaped by init (a zombie) has ended."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_up_apply_restart_scale_down(root, shell, node_state: Path, network_names, port: int, wait,
                                     tmp_path: Path) -> None:
    bridge, _ = network_names
    wait_for = wait
    runc_root = node_state / "runc"
    up = shell.up_local(port, node_state, network_names)
    try:
        assert "cluster ready" in up.stdout and "(runc)" in up.stdout
        assert "already running" in shell.cca("up", "--detach").stdout
        nodes = shell.cca("get", "nodes").stdout
        assert "ready" in nodes, nodes

        applied = shell.cca("apply", str(HELLO), "--wait", "--timeout", "60")
        assert "all instances ready" in applied.stderr
        instances = json.loads(shell.cca("get", "instances", "-o", "json").stdout)
        assert len(instances) == 2 and {i["state"] for i in instances} == {"running"}
        for inst in instances:
            assert inst["name"].startswith("hello-") and inst["service"] == "default/hello"
            assert wait_for(lambda inst=inst: answer(inst["ip"]), f"{inst['name']} to answer") \
                == f"hello from {inst['name']}\n"

        victim = instances[0]
        cid = container_id(f"default/{victim['name']}")
        state = json.loads(subprocess.run(["runc", "--root", str(runc_root), "state", cid],
                                          capture_output=True, text=True, check=True).stdout)
        os.kill(state["pid"], signal.SIGKILL)
        wait_for(lambda: any(i["name"] == victim["name"] and i["restarts"] >= 1 and i["state"] == "running"
                             for i in shell.instances()), "the killed container to be restarted")
        assert wait_for(lambda: answer(victim["ip"]), "the restarted container to answer") \
            == f"hello from {victim['name']}\n"

        one = tmp_path / "hello.cca"
        one.write_text(HELLO.read_text().replace("instances 2", "instances 1"))
        shell.cca("apply", str(one), "--wait", "--timeout", "60")
        remaining = wait_for(lambda: (left := shell.instances()) and len(left) == 1 and left, "scale down")
        gone = next(i for i in instances if i["name"] != remaining[0]["name"])
        wait_for(lambda: container_id(f"default/{gone['name']}") not in runc_ids(runc_root),
                 "the removed container to go")
        # The agent deletes the container first, then its network namespace.
        wait_for(lambda: not (Path("/run/netns") / netns_of(bridge, gone["name"])).exists(),
                 "the removed container's network namespace to go")
        assert (Path("/run/netns") / netns_of(bridge, remaining[0]["name"])).exists()
        assert answer(gone["ip"]) is None
        assert answer(remaining[0]["ip"]) == f"hello from {remaining[0]['name']}\n"
        assert links().count(f"master {bridge} ") == 1  # one veth left on the bridge
    finally:
        pids = [int(p.read_text()) for p in (shell.home / "run").glob("*.pid")]
        down = shell.cca("down")
    assert "stopped agent and server" in down.stdout
    assert shell.cca("down").stdout.strip() == "not running"
    assert runc_ids(runc_root) == set()
    assert bridge not in links()
    assert not [p for p in Path("/run/netns").glob(f"{bridge}-*")]
    assert str(node_state) not in Path("/proc/self/mounts").read_text()
    assert not nat.exists(bridge)
    assert not list((shell.home / "run").glob("*.pid"))
    assert len(pids) == 2 and not [pid for pid in pids if alive(pid)], "processes left"
