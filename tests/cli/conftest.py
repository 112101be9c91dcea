"""A real cluster for CLI tests: `cca init` in a temporary CCA_HOME and `cca server` as a process
on free loopback ports (SQLite store, or etcd via the store engineer's launcher)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ccattler.cli.main import app
from ccattler.engine.clientconfig import free_port_pair

CCA = str(Path(sys.executable).parent / "cca")


class CliCluster:
    def __init__(self, home: Path, store_url: str, runner: bool = False):
        self.home, self.store_url = home, store_url
        self.port = free_port_pair()
        self.env = {"CCA_HOME": str(home)}
        result = self.cca("init", "--server", f"127.0.0.1:{self.port}")
        assert result.exit_code == 0, result.output
        self.log = open(home / "server.log", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [CCA, "server", "--store", store_url, "--metrics", "off",
             "--runner" if runner else "--no-runner"],
            env=os.environ | self.env, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError((self.home / "server.log").read_text())
            if self.cca("status").exit_code == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("server did not come up: " + (self.home / "server.log").read_text())

    def cca(self, *args: str, input: str | bytes | None = None, env: dict | None = None):
        return CliRunner().invoke(app, list(args), input=input, env=self.env | (env or {}))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@pytest.fixture
def cli_cluster(tmp_path):
    c = CliCluster(tmp_path / "home", f"sqlite://{tmp_path}/state.db")
    yield c
    c.stop()


@pytest.fixture
def cli_cluster_with_runner(tmp_path):
    c = CliCluster(tmp_path / "home", f"sqlite://{tmp_path}/state.db", runner=True)
    yield c
    c.stop()


@pytest.fixture
def etcd_cli_cluster(tmp_path):
    from ccattler.engine.store.etcd_process import EtcdProcess

    with EtcdProcess() as etcd:
        c = CliCluster(tmp_path / "home", etcd.url)
        yield c
        c.stop()


@pytest.fixture
def port_pair():
    """Find a free (mutual-TLS, bearer-token) port pair: call it."""
    return free_port_pair
