"""Admission tests run against the real stores: SQLite and a local etcd (one per session, a fresh
key prefix per test). Builders live in admission_builders.py."""

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ccattler.engine.store import Store, open_store
from ccattler.engine.store.etcd_process import EtcdProcess

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def etcd():
    with EtcdProcess() as process:
        yield process


@pytest.fixture(params=["sqlite", "etcd"])
def store(request):
    if request.param == "sqlite":
        url = "sqlite://:memory:"
    else:
        url = f"{request.getfixturevalue('etcd').url}?prefix=/admission-{uuid.uuid4().hex[:8]}/"
    with open_store(url) as s:
        yield s


@pytest.fixture(params=["sqlite", "etcd"])
def servers(request, tmp_path) -> Iterator[tuple[Store, Store]]:
    """Two ways in to one cluster state: two etcd clients (two API servers), or SQLite's one store
    (a file; one process may open it) used by two request threads."""
    if request.param == "sqlite":
        with open_store(f"sqlite://{tmp_path}/state.db") as store:
            yield store, store
        return
    url = f"{request.getfixturevalue('etcd').url}?prefix=/claims-{uuid.uuid4().hex[:8]}/"
    with open_store(url) as one, open_store(url) as two:
        yield one, two
