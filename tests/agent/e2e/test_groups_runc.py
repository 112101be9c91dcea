"""`share network` / `share volume` service groups on a real runc node: one namespace and address
per seat (localhost reaches the sibling), the shared volume, start and stop together."""

from __future__ import annotations

import random
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from ccattler.agent.images.store import ImageStore
from ccattler.agent.node import NodeCore
from ccattler.agent.reconcile import Backoff
from ccattler.agent.runtime.runc import RuncRuntime
from tests.agent.group_slice import group_slice, without

pytestmark = pytest.mark.e2e

A = ("echo written by a > /shared/data/note && mkdir -p /www && echo hello from a > /www/index.html"
     " && exec httpd -f -p 8080 -h /www")
B = "exec sleep 300"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _retry(fn, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except (OSError, AssertionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_members_share_localhost_a_volume_and_their_lifetime(busybox_state: Path, tmp_path: Path,
                                                            clean_check) -> None:
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    bridge = f"cg{random.randrange(16**4):04x}"
    subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}.0/24"
    runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
    core = NodeCore("n1", runtime, state_dir=state, bridge=bridge, backoff=Backoff(initial=0.2),
                    stop_timeout=0.5)
    facts = group_slice("n1", subnet, {"a": (A, 8080, ["a-x1"]), "b": (B, 9000, ["b-y1"])})
    try:
        observed = core.apply(facts)
        a, b = observed["observed/instance/default/a-x1"], observed["observed/instance/default/b-y1"]
        assert (a["state"], b["state"]) == ("running", "running"), observed
        assert a["ip"] == b["ip"] == subnet.rsplit(".", 1)[0] + ".2"  # one address: a's
        assert [att.name for att in core.network.attachments().values()] == ["group:default/g#0"]

        def from_b(script: str) -> str:
            result = runtime.exec("default/b-y1", ["sh", "-c", script])
            assert result.exit_code == 0, result
            return result.stdout.decode()

        # localhost in b is a's loopback: nc speaks HTTP to a's httpd
        reply = _retry(lambda: from_b("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc localhost 8080"))
        assert "hello from a" in reply
        assert _retry(lambda: from_b("cat /shared/data/note")) == "written by a\n"
        body = _retry(lambda: _DIRECT.open(f"http://{a['ip']}:8080/", timeout=1).read().decode())
        assert body == "hello from a\n"  # the shared address serves a's port from outside too

        # b leaves without a replacement: a stops with it and waits
        observed = core.apply(without(facts, "b-y1"))
        a = observed["observed/instance/default/a-x1"]
        assert a["state"] == "pending" and "start and stop together" in a["reason"]
        assert runtime.status("default/a-x1") is None
        # b is back: both start again, in one namespace
        observed = core.apply(facts)
        assert {observed[k]["state"] for k in observed} == {"running"}
        assert _retry(lambda: from_b("cat /shared/data/note")) == "written by a\n"
        assert "hello from a" in _retry(lambda: from_b("wget -q -O - http://127.0.0.1:8080/"))
    finally:
        core.shutdown(remove=True)
    clean_check(state, bridge)
