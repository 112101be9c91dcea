"""Fixtures for whole-system tests: `cca` run as the user runs it, in a temporary CCA_HOME and node
state dir (with the busybox image), on free loopback ports, its own bridge name and address range."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ccattler.engine.clientconfig import free_port_pair

CCA = (sys.executable, "-m", "ccattler.cli.main")


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("the end-to-end tests run real containers (runc, network namespaces, nftables): run "
                    "them as root (or deselect them with -m 'not e2e')", pytrace=False)


def wait_for(predicate: Callable[[], object], what: str, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.2)
    return result


class Shell:
    """Runs `cca …` as a separate process with this test's CCA_HOME, like a user's shell."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = os.environ | {"CCA_HOME": str(home), "NO_COLOR": "1"}

    def cca(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        done = subprocess.run([*CCA, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert done.returncode == 0, f"cca {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        return done

    def up_local(self, port: int, node_state: Path,
                 network_names: tuple[str, str]) -> subprocess.CompletedProcess:
        """`cca up --detach` on this test's loopback port, node state dir, bridge and address range."""
        bridge, cidr = network_names
        return self.cca("up", "--detach", "--server", f"127.0.0.1:{port}", "--state-dir", str(node_state),
                        "--bridge", bridge, "--runc-root", str(node_state / "runc"), "--cluster-cidr", cidr,
                        "--metrics", "off")

    def spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.home / f"{name}.log", "ab")  # noqa: SIM115 (the child holds it)
        return subprocess.Popen([*CCA, *args], env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)

    def instances(self) -> list[dict]:
        """`cca get instances -o json`, read in this process (the same rows; polling a subprocess
        costs seconds on a loaded machine)."""
        return self.get("instances")

    def get(self, kind: str) -> list[dict]:
        from ccattler.engine.api.client import Client
        from ccattler.engine.clientconfig import load_config

        with Client(load_config(self.home).context(None), timeout=30) as api:
            return json.loads(json.dumps(api.get(kind, all_tenants=kind != "nodes")["items"]))


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    home = tmp_path / "home"
    home.mkdir()
    return Shell(home)


@pytest.fixture(scope="session")
def busybox_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A node state dir holding the busybox image, built once (copied per test by hard links)."""
    require_root()
    from ccattler.agent.images.busybox import build_busybox
    from ccattler.agent.images.store import ImageStore

    state = tmp_path_factory.mktemp("busybox-state")
    build_busybox(ImageStore(state))
    return state


@pytest.fixture
def node_state(busybox_state: Path, tmp_path: Path) -> Path:
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    return state


@pytest.fixture
def network_names() -> tuple[str, str]:
    """(bridge name, cluster CIDR) no other test or cluster on this machine uses."""
    return f"ce{random.randrange(16**4):04x}", f"10.{random.randrange(150, 200)}.0.0/16"


@pytest.fixture
def wait() -> Callable[..., object]:
    """`wait(predicate, what, timeout=30)`: poll until the predicate returns something true."""
    return wait_for


@pytest.fixture
def port() -> int:
    """A free port whose successor is free too (for `cca init --server 127.0.0.1:PORT`)."""
    return free_port_pair()


@pytest.fixture
def root() -> None:
    require_root()


class Nodes:
    """A running `cca up --nodes N` cluster: its shell, node names, underlay layout and helpers."""

    def __init__(self, shell: Shell, names: tuple[str, ...], cidr: str) -> None:
        self.shell, self.names, self.cidr = shell, names, cidr

    def layout(self) -> dict:
        return json.loads((self.shell.home / "run" / "up.json").read_text())

    def netns_of(self, instance: dict) -> str:
        """The network namespace of a running instance (row of `shell.instances()`), from the host."""
        ip = instance["ip"]
        for name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split():
            out = subprocess.run(["ip", "-n", name, "-4", "-br", "addr"], capture_output=True,
                                 text=True).stdout
            if f" {ip}/" in out and "eth0" in out:
                return name
        raise AssertionError(f"no network namespace holds {instance['name']}'s {ip}")

    def run_in(self, instance: dict, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
        """Run a host command inside `instance`'s network namespace."""
        return subprocess.run(["ip", "netns", "exec", self.netns_of(instance), *args], capture_output=True,
                              text=True, timeout=timeout)


@pytest.fixture
def dataplane() -> str:
    """The data plane `three_nodes` starts its agents with (parametrize `dataplane` to change it)."""
    return "nftables"


@pytest.fixture
def identity_ttl() -> float | None:
    """The server's workload identity lifetime for `three_nodes` (None: its 1 h; override to rotate
    within a test)."""
    return None


@pytest.fixture
def metric_interval() -> float | None:
    """The agents' `--metric-interval` for `three_nodes` (None: their 10 s; override to sample
    requests/s faster within a test)."""
    return None


@pytest.fixture
def three_nodes(root, shell: Shell, busybox_state: Path, tmp_path: Path, port: int,
                dataplane: str, identity_ttl: float | None, metric_interval: float | None) -> Iterator[Nodes]:
    """`cca up --nodes 3 --detach` with runc: names, bridges, underlay /24 and cluster CIDR unique to
    this test; `cca down` afterwards, which must leave no namespace, link or nft table behind."""
    state = tmp_path / "state"  # its images are given to each node by `cca up --nodes` (hard links)
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    cidr = f"10.{random.randrange(150, 200)}.0.0/16"
    underlay = f"10.{random.randrange(201, 250)}.{random.randrange(256)}.0/24"
    up = shell.cca("up", "--detach", "--nodes", "3", "--underlay", underlay, "--server", f"127.0.0.1:{port}",
                   "--state-dir", str(state), "--cluster-cidr", cidr, "--metrics", "off",
                   "--dataplane", dataplane,
                   *(("--identity-ttl", str(identity_ttl)) if identity_ttl else ()),
                   *(("--metric-interval", str(metric_interval)) if metric_interval else ()), timeout=180)
    tag = json.loads((shell.home / "run" / "up.json").read_text())["underlay"]["tag"]
    try:
        assert "cluster ready" in up.stdout, up.stdout
        yield Nodes(shell, ("node-1", "node-2", "node-3"), cidr)
    finally:
        down = shell.cca("down", check=False, timeout=180)
        assert down.returncode == 0 and "could not remove" not in down.stdout + down.stderr, down.stdout
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
        tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
        assert f"cca-{tag}-" not in netns and f"cb{tag}" not in netns, netns
        assert f"ccau{tag}" not in links and f"cb{tag}" not in tables, (links, tables)
