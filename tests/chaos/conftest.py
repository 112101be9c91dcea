"""Real processes for the chaos tests: a 3-member TLS etcd cluster from deploy/etcd/cluster.sh,
and `cca server` / `cca runner` processes over it (short leases so a test takes seconds)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "deploy" / "etcd" / "cluster.sh"
CCA = str(Path(sys.executable).parent / "cca")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base_port() -> int:
    """A base port whose member ports (base+10/11, +20/21, +30/31) are all free right now."""
    for _ in range(100):
        base = random.randrange(30000, 60000, 100)
        if all(_free(base + 10 * i + j) for i in (1, 2, 3) for j in (0, 1)):
            return base
    raise RuntimeError("no free ports for an etcd cluster")


class Etcd3:
    """The script's cluster under `directory`; `url` is the store URL (mutual TLS, 3 endpoints)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.url = self.run("start", str(free_base_port())).strip()

    def run(self, *args: str) -> str:
        result = subprocess.run(["bash", str(SCRIPT), args[0], str(self.directory), *args[1:]],
                                capture_output=True, text=True, timeout=60,
                                env=os.environ | {"ETCD_HEARTBEAT": "50", "ETCD_ELECTION": "500"})
        assert result.returncode == 0, result.stderr
        return result.stdout

    def pid(self, member: str) -> int:
        return int((self.directory / f"{member}.pid").read_text())

    def kill(self, member: str) -> None:
        os.kill(self.pid(member), signal.SIGKILL)

    def stop(self) -> None:
        self.run("stop")


@pytest.fixture
def etcd3(tmp_path):
    cluster = Etcd3(tmp_path / "etcd")
    try:
        yield cluster
    finally:
        cluster.stop()


class Processes:
    """Child processes of one test (each in its own session); all killed at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.children: dict[str, subprocess.Popen] = {}
        self._logs: list = []

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(self.directory / f"{name}.log", "ab")  # noqa: SIM115 (closed in stop_all)
        self._logs.append(log)
        child = subprocess.Popen([CCA, *args], env=os.environ | env, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        self.children[name] = child
        return child

    def log(self, name: str) -> str:
        return (self.directory / f"{name}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        live = [child for child in self.children.values() if child.poll() is None]
        for child in live:
            try:
                os.kill(child.pid, signal.SIGCONT)  # a stopped child cannot handle SIGTERM
                child.terminate()
            except ProcessLookupError:
                pass
        for child in live:
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for log in self._logs:
            log.close()


@pytest.fixture
def processes(tmp_path):
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


class HaCluster:
    """`cca init` for two API servers on the etcd cluster, then servers/runners/agents on demand."""

    def __init__(self, home: Path, etcd: Etcd3, procs: Processes) -> None:
        from ccattler.engine.clientconfig import free_port_pair

        self.home, self.etcd, self.procs = home, etcd, procs
        self.env = {"CCA_HOME": str(home)}
        self.ports = [free_port_pair(), free_port_pair()]
        while self.ports[1] in (self.ports[0], self.ports[0] + 1, self.ports[0] - 1):
            self.ports[1] = free_port_pair()
        self.servers = [f"127.0.0.1:{port}" for port in self.ports]
        result = subprocess.run([CCA, "init", "--server", ",".join(self.servers), "--etcd", etcd.url],
                                env=os.environ | self.env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr

    def server(self, index: int) -> subprocess.Popen:
        args = ["server", "--listen", self.servers[index], "--metrics", "off", "--controllers", "off"]
        return self.procs.start(f"server{index}", args, self.env)

    def runner(self, name: str, ttl: float = 2.0) -> subprocess.Popen:
        return self.procs.start(name, ["runner", "--identity", name, "--leader-ttl", str(ttl)], self.env)

    def client(self, server: str | None = None):
        from ccattler.engine.api.client import Client
        from ccattler.engine.clientconfig import load_config

        ctx = load_config(self.home).context(None)
        if server:
            from dataclasses import replace

            from ccattler.engine.clientconfig import token_address

            ctx = replace(ctx, server=server, token_server=token_address(server))
        return Client(ctx, timeout=10)

    def wait_serving(self, server: str) -> None:
        from ccattler.engine.facts import CcaError

        def answers() -> bool:
            try:
                with self.client(server) as api:
                    api.get("nodes")
                return True
            except CcaError:
                return False

        from tests.chaos.util import wait_for

        wait_for(answers, f"the API server on {server}", 30, 0.2)

    def join_sim_nodes(self, count: int) -> subprocess.Popen:
        """Join sim-1…sim-N (node certificates in this home) and run them in one `cca agent`."""
        from ccattler.cli.localcluster import join_nodes
        from ccattler.engine.clientconfig import load_config

        names = tuple(f"sim-{i}" for i in range(1, count + 1))
        old = os.environ.get("CCA_HOME")
        os.environ["CCA_HOME"] = str(self.home)
        try:
            join_nodes(load_config(self.home).context(None), names)
        finally:
            if old is None:
                del os.environ["CCA_HOME"]
            else:
                os.environ["CCA_HOME"] = old
        args = ["agent", "--runtime", "sim", "--sim-nodes", str(count), "--ttl", "3", "--tick", "0.5",
                "--state-dir", str(self.home / "state")]
        return self.procs.start("agent", args, self.env)


@pytest.fixture
def ha_cluster(tmp_path, etcd3, processes):
    return HaCluster(tmp_path / "home", etcd3, processes)
