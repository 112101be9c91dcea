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
        for child in self.children.values():
            if child.poll() is None:
                try:
                    os.kill(child.pid, signal.SIGCONT)  # a stopped child cannot handle SIGTERM
                    child.terminate()
                    child.wait(10)
                except (subprocess.TimeoutExpired, ProcessLookupError):
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
