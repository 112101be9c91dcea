"""One real API server (mutual TLS and token listeners, SQLite store) per fuzz module: starting
one per example would spend the budget on PKI and ports."""

from __future__ import annotations

import pytest

from tests.engine.api.conftest import Cluster


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("fuzz"), rate=100_000, burst=100_000)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def admin(server):
    with server.client() as client:
        yield client
