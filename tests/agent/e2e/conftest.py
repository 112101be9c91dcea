"""Fixtures for the agent's end-to-end tests: a real node (runc, bridge, netns, nftables) in a temp
state dir with its own bridge name and subnet, torn down and checked clean after each test."""

from __future__ import annotations

import os
import random
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ccattler.agent.desired import InstanceSpec
from ccattler.agent.images.busybox import build_busybox
from ccattler.agent.images.store import ImageStore
from ccattler.agent.net import nat
from ccattler.agent.net.node import NETNS_DIR, NodeNetwork
from ccattler.agent.reconcile import Backoff, Reconciler
from ccattler.agent.runtime.runc import RuncRuntime, cgroup_token, remove_node_cgroups

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
HTTPD = "mkdir -p /www && echo hello from $HOSTNAME > /www/index.html && exec httpd -f -p 8080 -h /www"


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("agent e2e tests drive runc, network namespaces and nftables: run them as root "
                    "(deselect with -m 'not e2e')", pytrace=False)


@pytest.fixture(scope="session")
def busybox_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state dir holding the busybox image, built once per session (copied per test by hardlinks)."""
    require_root()
    state = tmp_path_factory.mktemp("busybox-state")
    build_busybox(ImageStore(state))
    return state


@dataclass
class Node:
    state: Path
    images: ImageStore
    runtime: RuncRuntime
    network: NodeNetwork
    reconciler: Reconciler
    subnet: str

    def ip(self, n: int) -> str:
        return self.subnet.rsplit(".", 1)[0] + f".{n}"

    def converge(self, desired: dict[str, InstanceSpec], until, timeout: float = 10.0) -> dict:
        """Reconcile every 0.1 s until `until(observed)` holds; returns the last observed documents."""
        deadline = time.monotonic() + timeout
        while True:
            observed = self.reconciler.reconcile(desired)
            if until(observed):
                return observed
            if time.monotonic() > deadline:
                raise AssertionError(f"did not converge in {timeout}s: {observed}")
            time.sleep(0.1)

    @staticmethod
    def http_get(ip: str, port: int = 8080, timeout: float = 5.0) -> str:
        """GET / from the host, retrying while the server comes up."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with _DIRECT.open(f"http://{ip}:{port}/", timeout=1) as response:
                    return response.read().decode()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def spec(self, name: str, n: int, command: str = HTTPD, memory: int = 32 << 20) -> InstanceSpec:
        return InstanceSpec(tenant="default", name=name, service="default/web", image="busybox",
                            command=command, cpu=100, memory=memory, ip=self.ip(n))


@pytest.fixture
def node(busybox_state: Path, tmp_path: Path) -> Iterator[Node]:
    require_root()
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    token = f"{random.randrange(16**4):04x}"
    subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}.0/24"
    images = ImageStore(state)
    runtime = RuncRuntime(state, images, runc_root=state / "runc")
    network = NodeNetwork(subnet, state, bridge=f"ct{token}")
    network.setup()
    reconciler = Reconciler("n1", runtime, network, backoff=Backoff(initial=0.2, maximum=1), stop_timeout=0.5)
    try:
        yield Node(state, images, runtime, network, reconciler, subnet)
    finally:
        reconciler.remove_all()
        reconciler.close()
        network.teardown()
        network.close()
        assert_clean(state, network.bridge)


@pytest.fixture
def clean_check():
    """The check that nothing of a node is left, for tests that build their own node."""
    return assert_clean


def assert_clean(state: Path, bridge: str) -> None:
    """Nothing of this node is left: runc containers, links, namespaces, mounts, nft table, and
    (removed here, as `cca down` does: runc leaves the parents it made) its node cgroups."""
    runc = subprocess.run(["runc", "--root", str(state / "runc"), "list", "-q"], capture_output=True,
                          text=True)
    assert runc.stdout.strip() == "", f"runc containers left: {runc.stdout}"
    cgroups = remove_node_cgroups(cgroup_token(state / "runc"))
    assert cgroups == [], f"node cgroups still in use: {cgroups}"
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert bridge not in links, f"bridge {bridge} left"
    leftovers = [p.name for p in NETNS_DIR.glob(f"{bridge}-*")] if NETNS_DIR.exists() else []
    assert leftovers == [], f"network namespaces left: {leftovers}"
    mounts = Path("/proc/self/mounts").read_text()
    assert str(state) not in mounts, "mounts left under the state dir"
    assert not nat.exists(bridge), f"nft table {nat.table_name(bridge)} left"
