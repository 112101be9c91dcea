"""Fixtures for image tests: a store holding the busybox image, and a real registry on loopback
(Debian's docker-registry with a temp storage dir) that `skopeo` pushes to."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ccattler.agent.images.busybox import build_busybox
from ccattler.agent.images.store import ImageStore


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    store = ImageStore(tmp_path / "state")
    build_busybox(store)
    return store


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Registry:
    host: str

    def push(self, source: str, dest: str, *extra: str) -> None:
        """`skopeo copy` a source (e.g. `oci:<layout>:busybox:latest`) to `<host>/<dest>`."""
        subprocess.run(["skopeo", "--insecure-policy", "copy", "-q", *extra, "--dest-tls-verify=false",
                        source, f"docker://{self.host}/{dest}"], check=True, capture_output=True, timeout=60)


@pytest.fixture
def registry_config() -> str:
    """Extra registry configuration (YAML); tests override this fixture, e.g. to add auth."""
    return ""


@pytest.fixture
def registry(tmp_path: Path, registry_config: str) -> Iterator[Registry]:
    for tool in ("docker-registry", "skopeo"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (deploy/install.sh installs it)", pytrace=False)
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: "
                      f"{tmp_path / 'registry'}\nhttp:\n  addr: 127.0.0.1:{port}\n{registry_config}")
    with open(tmp_path / "registry.log", "wb") as log:
        process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log,
                                   stdin=subprocess.DEVNULL)
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + 10
        while True:
            try:
                opener.open(f"http://127.0.0.1:{port}/v2/", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break  # up, and asking for credentials
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail(f"docker-registry did not start: {(tmp_path / 'registry.log').read_text()}")
                time.sleep(0.05)
        yield Registry(f"127.0.0.1:{port}")
    finally:
        process.terminate()
        process.wait(timeout=10)
