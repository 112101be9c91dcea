"""The agent loop against a real API server (mutual TLS, SQLite store): a sim node registers,
sees what is placed on it through its slice, and reports running instances; unplaced ones vanish."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from ccattler.agent.loop import AgentLoop
from ccattler.agent.node import NodeCore, node_document
from ccattler.agent.runtime.sim import SimProfile, SimRuntime
from ccattler.engine.api.agent_client import AgentClient
from ccattler.engine.api.client import Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.server import ApiServer, ServerOptions
from ccattler.engine.auth import create_token
from ccattler.engine.clientconfig import Context
from ccattler.engine.pki import init_cluster, key_pem, make_csr, new_key
from ccattler.engine.store import open_store


@pytest.fixture
def api(tmp_path: Path):
    files = init_cluster(tmp_path / "pki", "127.0.0.1:7443")
    store = open_store(f"sqlite://{tmp_path}/state.db")
    options = ServerOptions(listen="127.0.0.1:0", token_listen="127.0.0.1:0", metrics_listen="127.0.0.1:0")
    server = ApiServer(store, files, options).start()
    context = Context(name="test", server=server.listen, token_server=server.token_listen,
                      ca=str(files.ca_cert), cert=None, key=None)
    yield store, context
    server.stop(0)
    store.close()


def join(store, context: Context, tmp_path: Path, node: str) -> Client:
    token = create_token(store, "join", 60)[0]
    key = new_key()
    with Client(context, anonymous=True) as anon:
        reply = anon.unary(anon.agent, "Join", api_pb2.JoinRequest(token=token, node=node,
                                                                    csr=make_csr(key, node)))
    (tmp_path / f"{node}.crt").write_bytes(reply.cert)
    (tmp_path / f"{node}.key").write_bytes(key_pem(key))
    node_context = dataclasses.replace(context, cert=str(tmp_path / f"{node}.crt"),
                                       key=str(tmp_path / f"{node}.key"))
    return Client(node_context, timeout=10)


def wait_for(predicate, timeout: float = 10.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return result


def test_sim_agent_reports_what_its_slice_places(api, tmp_path: Path) -> None:
    store, context = api
    client = join(store, context, tmp_path, "n1")
    core = NodeCore("n1", SimRuntime(SimProfile(start_delay=0.0)))
    loop = AgentLoop(AgentClient(client), core, node_document(address="192.0.2.10"), ttl=5, tick=0.1)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: store.get("observed/node/n1"))
        store.txn(puts={
            "desired/service/default/web": {"kind": "service", "tenant": "default", "name": "web",
                                            "image": "busybox", "command": "httpd", "env": {},
                                            "config": {"env": {}, "files": []},
                                            "resources": {"cpu": 100, "memory": 1 << 20}},
            "derived/placement/default/web-a": {"service": "default/web", "instance": "web-a", "node": "n1",
                                                "revision": 1, "score": 0},
            "derived/placement/default/web-b": {"service": "default/web", "instance": "web-b", "node": "n2",
                                                "revision": 1, "score": 0},
        })
        doc = wait_for(lambda: (f := store.get("observed/instance/default/web-a")) and
                       f.value["state"] == "running" and f.value)
        assert doc["node"] == "n1" and doc["ready"] is True
        assert store.get("observed/instance/default/web-b") is None  # placed on another node
        store.delete("derived/placement/default/web-a")
        wait_for(lambda: store.get("observed/instance/default/web-a") is None)
        assert core.runtime.list() == []
    finally:
        stop.set()
        thread.join(timeout=5)
        client.close()
    assert not thread.is_alive()
