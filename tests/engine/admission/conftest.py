"""Admission tests run against the real stores: SQLite and a local etcd (one per session, a fresh
key prefix per test). Builders live in admission_builders.py."""

import sys
import uuid
from pathlib import Path

import pytest

from ccattler.engine.store import open_store
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
