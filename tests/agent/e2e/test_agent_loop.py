"""The whole node side through the real API: an agent loop with runc registers, its slice places two
busybox web servers, they answer HTTP at their addresses, a killed one is restarted and reported,
an unplaced one disappears from the node and from the store, and nothing is left at the end."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ccattler.agent.images.store import ImageStore
from ccattler.agent.loop import AgentLoop
from ccattler.agent.machine import node_document
from ccattler.agent.node import NodeCore
from ccattler.agent.reconcile import Backoff
from ccattler.agent.runtime.runc import RuncRuntime
from ccattler.engine.api.agent_client import AgentClient

pytestmark = pytest.mark.e2e

HELLO = "mkdir -p /www && echo hello from $HOSTNAME > /www/index.html && exec httpd -f -p 8080 -h /www"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def wait_for(predicate, timeout: float = 10.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return result


def answers(ip: str) -> str | None:
    try:
        return _DIRECT.open(f"http://{ip}:8080/", timeout=1).read().decode()
    except OSError:
        return None


def test_runc_agent_through_the_api(api, join_node, busybox_state: Path, tmp_path: Path, clean_check) -> None:
    store, _ = api
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    bridge = f"ca{random.randrange(16**4):04x}"
    prefix = f"10.{random.randrange(200, 250)}.{random.randrange(256)}"
    runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
    core = NodeCore("n1", runtime, state_dir=state, bridge=bridge, backoff=Backoff(initial=0.2),
                    stop_timeout=0.5)
    loop = AgentLoop(AgentClient(join_node("n1")), core, node_document(), ttl=5, tick=0.2)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        facts = {"desired/service/default/hello": {
                     "kind": "service", "tenant": "default", "name": "hello", "image": "busybox",
                     "command": HELLO, "env": {}, "config": {"env": {}, "files": []},
                     "resources": {"cpu": 100, "memory": 32 << 20}},
                 "derived/network/subnet/n1": {"node": "n1", "subnet": f"{prefix}.0/24"},
                 # what the network-policy controller writes: the agent starts nothing it has not decided
                 "derived/firewall/n1": {"node": "n1", "identities": {}, "policies": {},
                                         "open": ["default/hello"]}}
        for n, name in ((2, "hello-a"), (3, "hello-b")):
            facts[f"derived/placement/default/{name}"] = {"service": "default/hello", "instance": name,
                                                          "node": "n1", "revision": 1, "score": 0}
            facts[f"derived/network/ip/default/{name}"] = {"node": "n1", "ip": f"{prefix}.{n}"}
        store.txn(puts=facts)

        def observed(name: str) -> dict | None:
            fact = store.get(f"observed/instance/default/{name}")
            return fact.value if fact else None

        for name in ("hello-a", "hello-b"):
            doc = wait_for(lambda name=name: (d := observed(name)) and d["state"] == "running" and d)
            assert wait_for(lambda doc=doc: answers(doc["ip"])) == f"hello from {name}\n"
        os.kill(runtime.status("default/hello-a").pid, signal.SIGKILL)
        doc = wait_for(lambda: (d := observed("hello-a")) and d["restarts"] == 1 and d["state"] == "running"
                       and d)
        assert wait_for(lambda: answers(doc["ip"])) == "hello from hello-a\n"
        store.delete("derived/placement/default/hello-b")
        wait_for(lambda: observed("hello-b") is None)
        assert [s.name for s in runtime.list()] == ["default/hello-a"]
        assert list(core.network.attachments()) == ["default/hello-a"]
    finally:
        stop.set()
        thread.join(timeout=10)
        core.shutdown(remove=True)
    clean_check(state, bridge)
