"""Shared fixtures: a real API server on loopback (fresh cluster PKI, SQLite store) and nodes that
join it with a token and a CSR, as agents do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ccattler.engine.api.client import Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.server import ApiServer, ServerOptions
from ccattler.engine.auth import create_token
from ccattler.engine.clientconfig import Context
from ccattler.engine.pki import init_cluster, key_pem, make_csr, new_key
from ccattler.engine.store import open_store


class ApiHarness:
    """A running API server on its store; `restart` brings it back on the same ports."""

    def __init__(self, tmp_path: Path) -> None:
        self.files = init_cluster(tmp_path / "pki", "127.0.0.1:7443")
        self.store = open_store(f"sqlite://{tmp_path}/state.db")
        self.server = self._serve("127.0.0.1:0", "127.0.0.1:0")
        self.context = Context(name="test", server=self.server.listen, token_server=self.server.token_listen,
                               ca=str(self.files.ca_cert), cert=None, key=None)

    def _serve(self, listen: str, token_listen: str) -> ApiServer:
        options = ServerOptions(listen=listen, token_listen=token_listen, metrics_listen="127.0.0.1:0")
        return ApiServer(self.store, self.files, options).start()

    def restart(self) -> None:
        self.server.stop(0)
        self.server = self._serve(self.server.listen, self.server.token_listen)

    def close(self) -> None:
        self.server.stop(0)
        self.store.close()


@pytest.fixture
def api_harness(tmp_path: Path):
    harness = ApiHarness(tmp_path)
    yield harness
    harness.close()


@pytest.fixture
def api(api_harness: ApiHarness):
    """(store, anonymous context) of a running API server."""
    return api_harness.store, api_harness.context


@pytest.fixture
def join_node(api, tmp_path: Path):
    """Join a node (single-use token + CSR) and return a client holding its certificate."""
    store, context = api
    clients = []

    def join(node: str) -> Client:
        token = create_token(store, "join", 60)[0]
        key = new_key()
        with Client(context, anonymous=True) as anon:
            reply = anon.unary(anon.agent, "Join", api_pb2.JoinRequest(token=token, node=node,
                                                                        csr=make_csr(key, node)))
        (tmp_path / f"{node}.crt").write_bytes(reply.cert)
        (tmp_path / f"{node}.key").write_bytes(key_pem(key))
        node_context = dataclasses.replace(context, cert=str(tmp_path / f"{node}.crt"),
                                           key=str(tmp_path / f"{node}.key"))
        clients.append(Client(node_context, timeout=10))
        return clients[-1]

    yield join
    for client in clients:
        client.close()
