"""`cca agent`'s node: joins with a token (the certificate kept in CCA_HOME, a second start reuses
it), registers, and when its certificate is due renews it and carries on over a new connection."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ccattler.agent import process
from ccattler.agent.machine import node_document
from ccattler.agent.node import NodeCore
from ccattler.agent.runtime.sim import SimRuntime
from ccattler.engine.api import enroll
from ccattler.engine.api.server import ApiServer, ServerOptions
from ccattler.engine.auth import create_token
from ccattler.engine.pki import init_cluster
from ccattler.engine.store import open_store


@pytest.fixture
def server(tmp_path: Path):
    files = init_cluster(tmp_path / "pki", "127.0.0.1:7443")
    store = open_store(f"sqlite://{tmp_path}/state.db")
    api = ApiServer(store, files, ServerOptions(listen="127.0.0.1:0", token_listen="127.0.0.1:0",
                                                metrics_listen=None)).start()
    yield api, store, files
    api.stop(0)
    store.close()


def test_join_once_register_renew(server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    api, store, files = server
    monkeypatch.setenv("CCA_HOME", str(tmp_path / "home"))
    token = create_token(store, "join", 60)[0]
    join = (token, api.token_listen)
    first = process.node_settings("n1", node_document(capacity={"cpu": 1000, "memory": 1 << 30}),
                                  api.listen, join, files.ca_cert, None)
    assert Path(first.context.cert).parent == tmp_path / "home" / "nodes" / "node-n1"
    again = process.node_settings("n1", first.document, api.listen, join, files.ca_cert, None)  # spent token
    assert again.context.cert == first.context.cert

    node = process.NodeAgent(first, NodeCore("n1", SimRuntime()), ttl=3, tick=0.2).start()
    try:
        deadline = time.monotonic() + 20
        while store.get("observed/node/n1") is None:
            assert time.monotonic() < deadline, "the node did not register"
            time.sleep(0.1)
        old_cert = Path(first.context.cert).read_bytes()
        old_client = node.loop.client
        monkeypatch.setattr(enroll, "needs_renewal", lambda context: True)
        node.renew_if_due()
        assert Path(first.context.cert).read_bytes() != old_cert and node.loop.client is not old_client
        store.delete("observed/node/n1")  # the loop must register again, over the new connection
        deadline = time.monotonic() + 20
        while store.get("observed/node/n1") is None:
            assert time.monotonic() < deadline, "the node did not register again after the renewal"
            time.sleep(0.1)
    finally:
        node.stop()
