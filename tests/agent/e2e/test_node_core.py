"""NodeCore with runc, driven by a slice of facts in the shapes the controllers write."""

from __future__ import annotations

import random
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from ccattler.agent.images.store import ImageStore
from ccattler.agent.machine import cleanup_node
from ccattler.agent.net import nat
from ccattler.agent.net.node import NETNS_DIR, NetworkError, NodeNetwork
from ccattler.agent.node import NodeCore
from ccattler.agent.reconcile import Backoff
from ccattler.agent.runtime.runc import RuncRuntime

pytestmark = pytest.mark.e2e

HELLO = "mkdir -p /www && echo hello from $HOSTNAME > /www/index.html && exec httpd -f -p 8080 -h /www"


def hello_slice(node: str, subnet: str, names: list[str]) -> dict:
    """What examples/hello.cca becomes once placed on `node` (docs/facts.md shapes)."""
    prefix = subnet.rsplit(".", 1)[0]
    facts = {
        "desired/service/default/hello": {
            "kind": "service", "tenant": "default", "name": "hello", "source": "hello.cca",
            "image": "busybox", "instances": len(names), "command": HELLO,
            "expose": [{"port": 8080, "protocol": "tcp", "external": False}],
            "resources": {"cpu": 100, "memory": 32 << 20}, "env": {},
            "config": {"env": {"GREETING": "hi"}, "files": [{"path": "/etc/motd", "content": "hi\n",
                                                              "from": None}]}},
        f"derived/network/subnet/{node}": {"node": node, "subnet": subnet, "gateway": f"{prefix}.1"},
        # what the network-policy controller writes: the agent starts nothing it has not decided
        f"derived/firewall/{node}": {"node": node, "identities": {}, "policies": {},
                                     "open": ["default/hello"]},
    }
    for n, name in enumerate(names, start=2):
        facts[f"derived/placement/default/{name}"] = {"service": "default/hello", "instance": name,
                                                      "node": node, "revision": 7, "score": 0}
        facts[f"derived/instance/default/hello/{name}"] = {"service": "default/hello", "name": name,
                                                           "ordinal": None, "spec": "x", "image": "busybox",
                                                           "resources": {"cpu": 100, "memory": 32 << 20}}
        facts[f"derived/network/ip/default/{name}"] = {"instance": name, "service": "default/hello",
                                                       "node": node, "ip": f"{prefix}.{n}", "prefix": 24,
                                                       "gateway": f"{prefix}.1"}
    return facts


def test_slice_to_http_answers_and_back_to_nothing(busybox_state: Path, tmp_path: Path, clean_check) -> None:
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    bridge = f"cn{random.randrange(16**4):04x}"
    subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}.0/24"
    runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
    core = NodeCore("n1", runtime, state_dir=state, bridge=bridge, backoff=Backoff(initial=0.2),
                    stop_timeout=0.5)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        facts = hello_slice("n1", subnet, ["hello-x1", "hello-x2"])
        observed = core.apply(facts)
        assert {doc["state"] for doc in observed.values()} == {"running"}
        for key, doc in observed.items():
            deadline = time.monotonic() + 5
            while True:
                try:
                    body = opener.open(f"http://{doc['ip']}:8080/", timeout=1).read().decode()
                    break
                except OSError:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            assert body == f"hello from {key.rsplit('/', 1)[1]}\n"
        motd = runtime.exec("default/hello-x1", ["sh", "-c", "cat /etc/motd; echo $GREETING"])
        assert motd.stdout == b"hi\nhi\n"
        remaining = core.apply(hello_slice("n1", subnet, ["hello-x2"]))
        assert list(remaining) == ["observed/instance/default/hello-x2"]
    finally:
        core.shutdown(remove=True)
    clean_check(state, bridge)


def test_containers_survive_an_agent_restart(busybox_state: Path, tmp_path: Path, clean_check) -> None:
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    bridge = f"cr{random.randrange(16**4):04x}"
    subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}.0/24"
    facts = hello_slice("n1", subnet, ["hello-x1"])

    def core() -> NodeCore:
        runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
        return NodeCore("n1", runtime, state_dir=state, bridge=bridge, stop_timeout=0.5)

    first = core()
    try:
        assert first.apply(facts)["observed/instance/default/hello-x1"]["state"] == "running"
        pid = first.runtime.status("default/hello-x1").pid
        first.shutdown(remove=False)  # the agent exits; its containers keep running
        second = core()
        doc = second.apply(facts)["observed/instance/default/hello-x1"]
        assert (doc["state"], doc["restarts"]) == ("running", 0)
        assert second.runtime.status("default/hello-x1").pid == pid
        second.shutdown(remove=False)
    finally:
        cleanup = core()
        cleanup.apply({k: v for k, v in facts.items() if not k.startswith("derived/placement/")})
        cleanup.shutdown(remove=True)
    clean_check(state, bridge)


def test_cleanup_after_an_agent_that_died(busybox_state: Path, tmp_path: Path, clean_check) -> None:
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    bridge = f"cd{random.randrange(16**4):04x}"
    subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}.0/24"
    runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
    core = NodeCore("n1", runtime, state_dir=state, bridge=bridge)
    observed = core.apply(hello_slice("n1", subnet, ["hello-x1", "hello-x2"]))
    assert {doc["state"] for doc in observed.values()} == {"running"}
    # the agent dies here: no shutdown; `cca down` cleans up from the state dir alone
    cleanup_node(state, "runc", bridge, runc_root=state / "runc")
    clean_check(state, bridge)


def test_cleanup_removes_a_namespace_pin_with_mounts_stacked_over_it(busybox_state: Path, tmp_path: Path,
                                                                      clean_check) -> None:
    """Issue 12 class 7: a pin another `ip netns add` stacked a mount over ("Device or resource
    busy" on unlink) is unmounted lazily until it is free; every other step still runs."""
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    bridge = f"cd{random.randrange(16**4):04x}"
    subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}.0/24"
    runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
    core = NodeCore("n1", runtime, state_dir=state, bridge=bridge)
    core.apply(hello_slice("n1", subnet, ["hello-y1", "hello-y2"]))
    pins = sorted(p for p in NETNS_DIR.iterdir() if p.name.startswith(bridge))
    assert pins, "the containers' namespaces are pinned under /run/netns"
    for _ in range(3):  # three mounts stacked over one pin
        subprocess.run(["mount", "--bind", str(pins[0]), str(pins[0])], check=True)
    assert cleanup_node(state, "runc", bridge, runc_root=state / "runc") == []
    clean_check(state, bridge)


def test_network_teardown_tries_every_step_and_names_what_failed(tmp_path: Path, monkeypatch) -> None:
    network = NodeNetwork("10.251.7.0/24", tmp_path, f"cd{random.randrange(16**4):04x}")
    network.setup()
    try:
        (network.records / "broken.json").write_text(
            '{"name": "broken", "ip": "10.251.7.5", "netns": "x-broken", "veth": "vbroken"}')

        def refuse(name: str) -> None:
            raise NetworkError(f"cannot remove network namespace x-{name}: Device or resource busy")

        monkeypatch.setattr(network, "detach", refuse)
        with pytest.raises(NetworkError, match="container network broken: .*busy"):
            network.teardown()
        assert not nat.exists(network.bridge), "the later steps ran anyway: NAT table removed"
        assert subprocess.run(["ip", "link", "show", network.bridge], capture_output=True).returncode != 0
    finally:
        monkeypatch.undo()
        (network.records / "broken.json").unlink(missing_ok=True)
        network.teardown()
        network.close()


def test_containers_resolve_cluster_names_through_the_node_resolver(busybox_state: Path, tmp_path: Path,
                                                                    clean_check) -> None:
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    bridge = f"cn{random.randrange(16**4):04x}"
    subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}.0/24"
    runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
    core = NodeCore("n1", runtime, state_dir=state, bridge=bridge, backoff=Backoff(initial=0.2),
                    stop_timeout=0.5)
    gateway = subnet.rsplit(".", 1)[0] + ".1"
    facts = hello_slice("n1", subnet, ["hello-x1"])
    facts["derived/dns/default/hello"] = {"service": "default/hello", "name": "hello.default.cca.local",
                                          "ttl": 5, "records": [
                                              {"name": "hello.default.cca.local", "type": "A",
                                               "address": "10.96.0.7"}]}
    try:
        core.apply(facts)
        resolv = runtime.exec("default/hello-x1", ["cat", "/etc/resolv.conf"]).stdout.decode()
        assert resolv == f"nameserver {gateway}\nsearch default.cca.local cca.local\noptions ndots:5\n"
        for name in ("hello.default.cca.local", "hello"):  # the short name through the search list
            out = runtime.exec("default/hello-x1", ["nslookup", name])
            assert b"10.96.0.7" in out.stdout, (name, out)
        missing = runtime.exec("default/hello-x1", ["nslookup", "nope.default.cca.local"])
        assert b"10.96.0.7" not in missing.stdout and missing.exit_code != 0, missing
        del facts["derived/dns/default/hello"]  # the name goes with its document
        core.apply(facts)
        assert b"10.96.0.7" not in runtime.exec("default/hello-x1", ["nslookup", "hello"]).stdout
    finally:
        core.shutdown(remove=True)
    clean_check(state, bridge)
