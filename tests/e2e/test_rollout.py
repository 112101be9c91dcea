"""Rolling updates through the real processes: a `cca server` and one `cca agent --runtime process`
node (each instance is a real process running the service's `command`). v1 → v2 is a rolling
update, every instance change recorded from the store's watch: ready instances never below the
floor (instances 4 − max_unavailable 1), never more than instances + max_extra documents at
once, and `cca apply --wait` waits for the rollout. A broken v3 (`command "exit 1"`) rolls back by
itself: `cca apply --wait` fails saying so, `cca rollout history` and `cca events` say why; `cca
rollout undo` re-applies the previous spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ccattler.engine.facts import CcaError

pytestmark = pytest.mark.e2e

CCA = (sys.executable, "-m", "ccattler.cli.main")

SERVICE = """service web {{
    image {image}
    instances 4
    command "{command}"
    env {{ VERSION "{version}" }}
    readiness {{ exec "true"  every 1s }}
    update {{ max_unavailable 1  max_extra 1  deadline 2m }}
    resources {{ cpu 10m  memory 16Mi }}
}}
"""


class Recorder:
    """Follows derived/instance and observed/instance of `web` through one API watch (from the
    current revision); after every change notes (instance documents, ready instances among them)."""

    def __init__(self, shell) -> None:  # noqa: ANN001
        from ccattler.engine.api.client import Client
        from ccattler.engine.clientconfig import load_config

        self.client = Client(load_config(shell.home).context(None), timeout=30)
        self.docs: dict[str, str] = {}  # instance → spec
        self.ready: dict[str, bool] = {}
        self.samples: list[tuple[int, int]] = []
        self.stop = False
        self.thread = threading.Thread(target=self._follow, daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        revision = None
        try:
            for event in self.client.watch(""):
                if self.stop:
                    return
                if revision is not None and event["revision"] != revision:
                    self._sample()  # a transaction's events all applied: one state of the cluster
                revision = event["revision"]
                key, value = event["key"], event["value"]
                if key.startswith("derived/instance/default/web/"):
                    name = key.rsplit("/", 1)[1]
                    if value is None:
                        self.docs.pop(name, None)
                    else:
                        self.docs[name] = value["spec"]
                elif key.startswith("observed/instance/default/web-"):
                    self.ready[key.rsplit("/", 1)[1]] = bool(value and value.get("ready"))
        except CcaError:
            return

    def _sample(self) -> None:
        sample = (len(self.docs), sum(self.ready.get(n, False) for n in self.docs))
        if not self.samples or self.samples[-1] != sample:
            self.samples.append(sample)

    def close(self) -> None:
        self.stop = True
        self.client.close()


def processes_running(state_dir: Path, command: str) -> int:
    """Processes of the process runtime under `state_dir` running `command`."""
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cwd.startswith(str(state_dir)) and command.encode() in argv:
            count += 1
    return count


def rollout(shell, what: str = "status") -> str:  # noqa: ANN001
    return shell.cca("rollout", what, "web").stdout


def state(shell) -> str:  # noqa: ANN001
    return json.loads(shell.cca("rollout", "status", "web", "-o", "json").stdout)["state"]


def _answers(shell) -> bool:  # noqa: ANN001
    try:
        shell.get("nodes")
        return True
    except CcaError:
        return False


def scenario(shell, wait, tmp_path: Path, image, holder: list, state_dir: Path | None) -> None:  # noqa: ANN001
    """v1, a rolling update to v2 recorded from the watch, a broken v3 that rolls back, undo."""
    web = tmp_path / "web.cca"
    web.write_text(SERVICE.format(image=image(1), version="1", command="sleep 6001"))
    shell.cca("apply", str(web), "--wait", "--timeout", "60")
    wait(lambda: state(shell) == "complete", "v1's rollout document", 60)

    recorder = holder[0] = Recorder(shell)  # the watch starts now: seeded with the settled v1 instances
    for row in shell.instances():
        recorder.docs[row["name"]], recorder.ready[row["name"]] = row["value"]["spec"], row["ready"]
    assert len(recorder.docs) == 4 and all(recorder.ready.values())
    recorder.samples.clear()
    web.write_text(SERVICE.format(image=image(2), version="2", command="sleep 6002"))
    applied = shell.cca("apply", str(web), "--wait", "--timeout", "90")  # waits for the rollout
    assert "all instances ready" in applied.stderr and state(shell) == "complete", applied.stderr
    wait(lambda: state(shell) == "complete" and len(shell.instances()) == 4
         and all(i["state"] == "running" for i in shell.instances()), "v2 rolled out", 90)
    samples = list(recorder.samples)
    assert len({n for n, _ in samples}) > 1, samples  # it stepped (5 documents at its widest)
    assert max(n for n, _ in samples) <= 5, samples  # instances 4 + max_extra 1
    assert min(ready for _, ready in samples) >= 3, samples  # instances 4 − max_unavailable 1
    history = rollout(shell, "history")
    assert image(2) in history and "complete" in history, history

    recorder.samples.clear()
    web.write_text(SERVICE.format(image=image(3), version="3", command="exit 1"))
    broken = shell.cca("apply", str(web), "--wait", "--timeout", "90", check=False)
    assert broken.returncode == 1 and "rolled back: " in broken.stderr, broken.stderr
    assert "failures of new instances" in broken.stderr, broken.stderr
    wait(lambda: state(shell) == "rolled back", "v3 to roll back by itself", 90)
    history = rollout(shell, "history")
    assert "rolled back" in history and "failures of new instances" in history, history
    status = rollout(shell)
    assert "rolled back:" in status and "exited" in status, status
    events = shell.cca("events").stdout
    assert "rolled back: " in events and "failures of new instances" in events, events
    wait(lambda: len(shell.instances()) == 4 and all(i["state"] == "running" for i in shell.instances()),
         "v2 running again", 120)
    assert min(ready for _, ready in recorder.samples) >= 3, recorder.samples
    if state_dir is not None:
        # The service document says `exit 1`; the kept and re-created v2 instances run v2's command,
        # built from the rollout document's fields (the agent picks them by the instance's spec).
        wait(lambda: processes_running(state_dir, "sleep 6002") == 4, "four v2 processes", 60)

    undo = shell.cca("rollout", "undo", "web")
    assert "rolls back to its previous spec" in undo.stdout, undo.stdout

def test_rolling_update_keeps_the_floor_and_a_broken_version_rolls_back(shell, port: int, wait,
                                                                          tmp_path: Path) -> None:
    shell.cca("init", "--server", f"127.0.0.1:{port}")
    state_dir = tmp_path / "node"
    processes = {"server": shell.spawn("server", "server", "--store", f"sqlite://{tmp_path}/state.db",
                                       "--metrics", "off")}
    holder: list = [None]
    try:
        wait(lambda: _answers(shell), "the server", 60)
        token = shell.cca("token", "create", "--ttl", "5m").stdout.strip()
        processes["agent"] = shell.spawn("agent", "agent", "--runtime", "process", "--node-id", "p1",
                                         "--token", token, "--tick", "0.5", "--state-dir", str(state_dir))
        wait(lambda: [r["condition"] for r in shell.get("nodes")] == ["ready"], "the node", 60)
        scenario(shell, wait, tmp_path, lambda v: f"app:{v}", holder, state_dir)
    finally:
        if holder[0] is not None:
            holder[0].close()
        shell.cca("delete", "service", "web", check=False)
        try:
            wait(lambda: not shell.instances(), "the instances to stop", 30)
        except (AssertionError, CcaError):
            pass
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        subprocess.run([*CCA, "agent", "--cleanup", "--runtime", "process", "--state-dir", str(state_dir)],
                       env=shell.env, capture_output=True, timeout=60)


def test_the_same_with_runc(root, shell, node_state: Path, network_names, port: int, wait,
                            tmp_path: Path) -> None:
    """The same scenario on a real runc node (`cca up`, busybox): v2 and v3 differ from v1 by
    command and env, so each is a new spec."""
    holder: list = [None]
    up = shell.up_local(port, node_state, network_names)
    try:
        assert "(runc)" in up.stdout, up.stdout
        scenario(shell, wait, tmp_path, lambda v: "busybox", holder, None)
    finally:
        if holder[0] is not None:
            holder[0].close()
        shell.cca("down", check=False)
