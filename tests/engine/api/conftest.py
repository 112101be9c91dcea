"""A real API server on loopback: a fresh cluster PKI, a SQLite store, free ports."""

from __future__ import annotations

import pytest

from ccattler.engine.api.client import Client
from ccattler.engine.api.server import ApiServer, ServerOptions
from ccattler.engine.clientconfig import Context
from ccattler.engine.pki import init_cluster
from ccattler.engine.store import open_store


class Cluster:
    def __init__(self, tmp_path, store_url=None, **options):
        self.files = init_cluster(tmp_path / "pki", "127.0.0.1:7443")
        self.store = open_store(store_url or f"sqlite://{tmp_path}/state.db")
        options = {"listen": "127.0.0.1:0", "token_listen": "127.0.0.1:0", "metrics_listen": "127.0.0.1:0",
                   "max_message_bytes": 1024 * 1024, "rate": 1000, "burst": 1000} | options
        self.server = ApiServer(self.store, self.files, ServerOptions(**options)).start()

    def context(self, **overrides) -> Context:
        fields = {"name": "test", "server": self.server.listen, "token_server": self.server.token_listen,
                  "ca": str(self.files.ca_cert), "cert": str(self.files.admin_cert),
                  "key": str(self.files.admin_key)} | overrides
        return Context(**fields)

    def client(self, **overrides) -> Client:
        return Client(self.context(**overrides), timeout=10)

    def close(self):
        self.server.stop(0)
        self.store.close()


@pytest.fixture
def make_cluster(tmp_path):
    """Start a cluster with server options overridden (closed at the end of the test)."""
    made = []

    def make(**options):
        made.append(Cluster(tmp_path / f"c{len(made)}", **options))
        return made[-1]

    yield make
    for c in made:
        c.close()


@pytest.fixture
def cluster(make_cluster):
    return make_cluster()
