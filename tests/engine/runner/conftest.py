"""Runner fixtures: `store` is a real SQLite file store and a real etcd (one per session), each test
on fresh keys; `sqlite_store` is SQLite alone for tests that need no second backend."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from ccattler.engine.runner import Runner
from ccattler.engine.store import open_store
from ccattler.engine.store.etcd_process import EtcdProcess

sys.path.insert(0, str(Path(__file__).parent))

from runner_builders import TTL  # noqa: E402  (needs the path above)


@pytest.fixture(scope="session")
def etcd_server():
    with EtcdProcess() as etcd:
        yield etcd


@pytest.fixture(params=["sqlite", "etcd"])
def store(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite://{tmp_path}/state.db"
    else:
        url = f"{request.getfixturevalue('etcd_server').url}?prefix=/runner-{uuid.uuid4().hex[:12]}/"
    with open_store(url) as opened:
        yield opened


@pytest.fixture
def sqlite_store(tmp_path):
    with open_store(f"sqlite://{tmp_path}/state.db") as opened:
        yield opened


@pytest.fixture
def runners():
    """Start runners with short timings; every one is stopped after the test."""
    started: list[Runner] = []

    def make(store, controllers, **kwargs) -> Runner:
        kwargs.setdefault("leader_ttl", TTL)
        kwargs.setdefault("debounce", 0.01)
        runner = Runner(store, controllers, **kwargs)
        started.append(runner)
        runner.start()
        return runner

    yield make
    for runner in started:
        runner.stop()
