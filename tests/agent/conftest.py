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


@pytest.fixture
def api(tmp_path: Path):
    """(store, anonymous context) of a running API server."""
    files = init_cluster(tmp_path / "pki", "127.0.0.1:7443")
    store = open_store(f"sqlite://{tmp_path}/state.db")
    options = ServerOptions(listen="127.0.0.1:0", token_listen="127.0.0.1:0", metrics_listen="127.0.0.1:0")
    server = ApiServer(store, files, options).start()
    context = Context(name="test", server=server.listen, token_server=server.token_listen,
                      ca=str(files.ca_cert), cert=None, key=None)
    yield store, context
    server.stop(0)
    store.close()


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
