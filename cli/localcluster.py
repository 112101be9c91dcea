"""The single-machine cluster `cca up` starts and `cca down` stops: a `cca server` on
`sqlite://$CCA_HOME/state.db` and one `cca agent` (a local node, or simulated nodes), run as child
processes with pid files in `$CCA_HOME/run/` and logs in `$CCA_HOME/logs/`, plus the record of how
they were started (`run/up.json`) so `cca down` can remove what the agent left on the node."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ccattler.engine.facts import CcaError

#: `cca` as a child process (works from any venv, whatever the console script is called).
CCA = (sys.executable, "-m", "ccattler.cli.main")
PROCESSES = ("agent", "server")  # stopped in this order


@dataclass(frozen=True, slots=True)
class Layout:
    """What was started, recorded for `cca down` (and a second `cca up`)."""

    context: str
    runtime: str
    state_dir: str
    bridge: str
    runc_root: str | None
    nodes: tuple[str, ...]
    #: `cca up --nodes N`: multinode.Underlay.to_json() (each node's agent is `agent-<node>`).
    underlay: dict | None = None
    #: `cca up --dataplane`: what every node's agent programs VIPs and policy with.
    dataplane: str = "nftables"
    #: `cca up --metric-interval`: every node's agent's `--metric-interval`.
    metric_interval: float = 10.0

    @staticmethod
    def load(home: Path) -> Layout | None:
        path = home / "run" / "up.json"
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise CcaError(f"{path} is unreadable ({exc}); stop the processes in {home / 'run'} by hand "
                           "and remove it") from None
        return Layout(**doc | {"nodes": tuple(doc["nodes"])})  # type: ignore[arg-type]

    def save(self, home: Path) -> None:
        (home / "run").mkdir(parents=True, exist_ok=True)
        (home / "run" / "up.json").write_text(json.dumps(asdict(self), indent=2) + "\n")


def running_pid(home: Path, name: str) -> int | None:
    """The pid of `name` from its pid file if that process is alive and is a `cca` process."""
    try:
        pid = int((home / "run" / f"{name}.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        status = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    zombie = status.rsplit(")", 1)[-1].split()[0] == "Z"
    return None if zombie or b"ccattler" not in cmdline else pid


def spawn(home: Path, name: str, args: list[str], prefix: list[str] | None = None) -> subprocess.Popen:
    """Start `cca ARGS` in its own session (Ctrl-C reaches only `cca up`, which stops it in order),
    output to `logs/<name>.log`, pid in `run/<name>.pid`; `prefix` e.g. enters a node's netns."""
    (home / "logs").mkdir(parents=True, exist_ok=True)
    (home / "run").mkdir(parents=True, exist_ok=True)
    with open(home / "logs" / f"{name}.log", "ab") as log:
        process = subprocess.Popen([*(prefix or ()), *CCA, *args], stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    (home / "run" / f"{name}.pid").write_text(f"{process.pid}\n")
    return process


def stop(home: Path, names: list[str], timeout: float = 15.0) -> list[str]:
    """SIGTERM every one of `names` at once, SIGKILL those still alive after `timeout`; the names
    that were running. All at once: each agent takes seconds to stop its containers."""
    pids = {}
    for name in names:
        pid = running_pid(home, name)
        (home / "run" / f"{name}.pid").unlink(missing_ok=True)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            pids[name] = pid
    deadline = time.monotonic() + timeout
    while alive := [pid for pid in pids.values() if _alive(pid)]:
        if time.monotonic() > deadline:
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
        time.sleep(0.05)
    return list(pids)


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our child (foreground `cca up`)
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def log_tail(home: Path, name: str, lines: int = 15) -> str:
    try:
        text = (home / "logs" / f"{name}.log").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("  " + line for line in text[-lines:])


def wait_until(check: Callable[[], Any], what: str, timeout: float, children: dict[str, subprocess.Popen],
               home: Path) -> Any:
    """Poll `check` until it returns something true; fail early (with its log) if a child exits."""
    deadline = time.monotonic() + timeout
    while True:
        for name, child in children.items():
            if child.poll() is not None:
                raise CcaError(f"{name} exited (code {child.returncode}) while waiting for {what}; "
                               f"{home / 'logs' / (name + '.log')} ends with:\n{log_tail(home, name)}")
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise CcaError(f"timed out after {timeout:g}s waiting for {what}; see {home / 'logs'}")
        time.sleep(0.2)


def server_answers(context: Any) -> bool:
    from ccattler.engine.api.client import Client

    try:
        with Client(context, timeout=2) as api:
            api.status()
        return True
    except CcaError:
        return False


def nodes_ready(context: Any, names: tuple[str, ...]) -> bool:
    from ccattler.engine.api.client import Client

    try:
        with Client(context, timeout=5) as api:
            rows = {r["name"]: r["condition"] for r in api.get("nodes")["items"]}
    except CcaError:
        return False
    return all(rows.get(name) == "ready" for name in names)


def join_nodes(admin: Any, names: tuple[str, ...]) -> None:
    """Enrol each node as a remote one would: a single-use join token, then a CSR (`node-<name>`)."""
    from ccattler.agent.process import join_node
    from ccattler.engine.api.client import Client

    with Client(admin, timeout=10) as api:
        for name in names:
            token = api.token_create(300).token
            join_node(admin.server, token, Path(admin.ca), name, admin.token_server)


def remove_node_leftovers(layout: Layout, say: Callable[[str], None] = print) -> None:
    """Containers, namespaces, veths, the bridge and NAT the local node's agent left behind."""
    if layout.runtime == "sim":
        return  # simulated containers lived in the agent process
    if layout.underlay is not None:
        from ccattler.cli.multinode import Underlay

        underlay = Underlay(**layout.underlay)
        cleanups = {  # each node's own containers, bridge, nft and overlay, from inside it, at once
            node: subprocess.Popen([*underlay.enter(node), *CCA, *node_agent_args(layout, node), "--cleanup"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for node in layout.nodes}
        problems = []
        for node, cleanup in cleanups.items():
            out, err = cleanup.communicate()
            if cleanup.returncode != 0:
                problems.append(f"node {node}: {(err or out).strip()[-300:]}")
        problems += underlay.destroy()
        for problem in problems:
            say(f"could not remove: {problem}")
        return
    from ccattler.agent.machine import cleanup_node

    for problem in cleanup_node(Path(layout.state_dir), layout.runtime, layout.bridge,
                                Path(layout.runc_root) if layout.runc_root else None):
        say(f"could not remove: {problem}")


def node_agent_args(layout: Layout, node: str) -> list[str]:
    """`cca agent` for one of `cca up --nodes N`'s nodes: its own state, runc root and container
    bridge (unique across the nodes: container netns names carry it)."""
    assert layout.underlay is not None
    return ["agent", "--runtime", layout.runtime, "--state-dir", f"{layout.state_dir}/{node}",
            "--bridge", f"cb{layout.underlay['tag']}{node.rsplit('-', 1)[-1]}",
            "--runc-root", f"{layout.state_dir}/{node}/runc", "--dataplane", layout.dataplane,
            "--metric-interval", str(layout.metric_interval)]


def down(home: Path, say: Callable[[str], None]) -> bool:
    """Stop the agent(s), remove what they left on the node(s), stop the server; False if nothing ran."""
    layout = Layout.load(home)
    agents = [f"agent-{n}" for n in layout.nodes] if layout and layout.underlay else []
    stopped = stop(home, [*PROCESSES[:1], *agents])
    if layout is not None:
        try:  # whatever happens here, the server below is still stopped
            remove_node_leftovers(layout, say)
        except Exception as exc:  # noqa: BLE001 (reported; `cca down` finishes its steps)
            say(f"could not remove the node's containers and network: {exc}")
    stopped += stop(home, list(PROCESSES[1:]))
    (home / "run" / "up.json").unlink(missing_ok=True)
    if layout is None and not stopped:
        return False
    say(f"stopped {' and '.join(stopped) or 'nothing (no process was running)'}"
        + (f"; removed the node's containers and network ({layout.runtime})"
           if layout and layout.runtime != "sim" else ""))
    return True
