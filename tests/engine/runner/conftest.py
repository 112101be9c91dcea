"""Runner fixtures: `store` is a real SQLite file store and a real etcd (one per session), each test
on fresh keys; `sqlite_store` is SQLite alone for tests that need no second backend."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from ccattler.engine.store import open_store
from ccattler.engine.store.etcd_process import EtcdProcess

sys.path.insert(0, str(Path(__file__).parent))


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
