"""Store fixtures: `store` runs each conformance test on SQLite (a durable file) and on a real etcd."""

from __future__ import annotations

import uuid

import pytest

from ccattler.engine.store import open_store
from ccattler.engine.store.etcd_process import EtcdProcess


@pytest.fixture(scope="session")
def etcd_server():
    """One real etcd for the session, on a free loopback port with a temp data dir."""
    with EtcdProcess() as etcd:
        yield etcd


@pytest.fixture(params=["sqlite", "etcd"])
def store(request, tmp_path):
    """A fresh store; on etcd each test gets its own key prefix, so tests never see each other."""
    if request.param == "sqlite":
        url = f"sqlite://{tmp_path}/state.db"
    else:
        etcd = request.getfixturevalue("etcd_server")
        url = f"{etcd.url}?prefix=/test-{uuid.uuid4().hex[:12]}/"
    with open_store(url) as opened:
        yield opened
