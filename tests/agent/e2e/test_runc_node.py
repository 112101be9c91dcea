"""Real containers on a real node: runc, a bridge, veths in network namespaces, nftables NAT."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path

import pytest

from ccattler.agent.net import nat
from ccattler.agent.net.node import NetworkError
from ccattler.agent.probes import Probe
from ccattler.agent.runtime.base import container_id
from ccattler.engine.facts import CcaError

pytestmark = pytest.mark.e2e


def running(*names: str):
    keys = [f"observed/instance/default/{n}" for n in names]
    return lambda observed: all(observed[k]["state"] == "running" for k in keys)


def test_httpd_container_answers_http_at_its_own_address(node) -> None:
    spec = node.spec("web-a", 2)
    observed = node.converge({spec.key: spec}, running("web-a"))
    doc = observed["observed/instance/default/web-a"]
    assert doc["ip"] == node.ip(2) and doc["ready"] is True and doc["restarts"] == 0
    assert node.http_get(node.ip(2)) == "hello from web-a\n"


def test_two_containers_reach_each_other_and_the_gateway(node) -> None:
    a, b = node.spec("web-a", 2), node.spec("web-b", 3)
    node.converge({a.key: a, b.key: b}, running("web-a", "web-b"))
    node.http_get(node.ip(3))
    result = node.runtime.exec(a.key, ["wget", "-q", "-O", "-", f"http://{node.ip(3)}:8080/"], timeout=5)
    assert (result.exit_code, result.stdout) == (0, b"hello from web-b\n"), result.stderr
    ping = node.runtime.exec(b.key, ["ping", "-c", "1", "-W", "1", node.network.gateway], timeout=5)
    assert ping.exit_code == 0, ping.stdout


def test_killed_container_is_restarted_with_the_same_address(node) -> None:
    spec = node.spec("web-a", 2)
    desired = {spec.key: spec}
    node.converge(desired, running("web-a"))
    node.http_get(node.ip(2))
    pid = node.runtime.status(spec.key).pid
    os.kill(pid, signal.SIGKILL)
    failed = node.converge(desired, lambda o: o["observed/instance/default/web-a"]["restarts"] == 1)
    assert failed["observed/instance/default/web-a"]["reason"].startswith("killed by SIGKILL")
    node.converge(desired, running("web-a"))
    assert node.runtime.status(spec.key).pid != pid
    assert node.http_get(node.ip(2)) == "hello from web-a\n"


def test_a_timed_out_exec_leaves_nothing_behind_and_the_container_starts_again(node) -> None:
    """A probe's `runc exec` past its timeout: its process (re-parented to the agent) is killed and
    reaped, so the container still stops, and starts again under the same id."""
    spec = node.spec("web-a", 2)
    desired = {spec.key: spec}
    node.converge(desired, running("web-a"))
    with pytest.raises(CcaError, match="did not finish within 0.5s"):
        node.runtime.exec(spec.key, ["sleep", "300"], timeout=0.5)
    ours = [line for line in os.popen("ps -o ppid=,args= -e").read().splitlines()
            if int(line.split()[0]) == os.getpid() and "sleep 300" in line]
    assert ours == []
    assert node.reconciler.reconcile({}) == {}
    assert node.runtime.list() == []
    node.converge(desired, running("web-a"))
    assert node.http_get(node.ip(2)) == "hello from web-a\n"


@pytest.mark.parametrize("tty", [False, True], ids=["pipes", "terminal"])
def test_a_killed_interactive_exec_takes_its_process_with_it(node, tty) -> None:
    """`cca exec` whose client went away: the tunnel kills runc, and the process it ran in the
    container goes too (killed, or hung up by its terminal, and reaped: no zombie of ours holds
    the container), so the container is deleted and starts again under the same id."""
    spec = node.spec("web-a", 2)
    desired = {spec.key: spec}
    node.converge(desired, running("web-a"))
    process = node.runtime.exec_process(spec.key, ["sleep", "301"], tty=tty)
    deadline = time.monotonic() + 5
    while not (started := _children(process.pid, "sleep 301")):
        assert time.monotonic() < deadline, "the exec never started its command"
        time.sleep(0.05)
    process.kill()
    process.wait()
    assert [pid for pid in started if os.path.exists(f"/proc/{pid}")] == []  # not even a zombie
    assert node.reconciler.reconcile({}) == {}
    assert node.runtime.list() == []
    node.converge(desired, running("web-a"))
    assert node.http_get(node.ip(2)) == "hello from web-a\n"


@pytest.mark.parametrize("tty", [False, True], ids=["pipes", "terminal"])
def test_an_interactive_exec_killed_while_runc_starts_it_leaves_nothing_behind(node, tty) -> None:
    """Killed in its first milliseconds (the client went away at once), a `runc exec` may have its
    init stages running, and those clone theirs as runc's children: none is left to the agent,
    alive or a zombie."""
    spec = node.spec("web-a", 2)
    node.converge({spec.key: spec}, running("web-a"))
    before = set(_children(os.getpid()))
    for delay in (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.03):
        process = node.runtime.exec_process(spec.key, ["sleep", "306"], tty=tty)
        time.sleep(delay)
        process.kill()
        process.wait()
    assert set(_children(os.getpid())) - before == set()
    assert node.reconciler.reconcile({}) == {}
    assert node.runtime.list() == []


def _children(parent: int, args: str | None = None) -> list[int]:
    """Pids of `parent`'s children (zombies too), those running `args` if given; read from /proc
    (a `ps` would be a child of ours itself)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):  # not a process, or gone meanwhile
            continue
        if ppid == parent and (args is None or command == args):
            found.append(int(proc.name))
    return found


def test_removed_placement_removes_container_veth_and_namespace(node) -> None:
    a, b = node.spec("web-a", 2), node.spec("web-b", 3)
    node.converge({a.key: a, b.key: b}, running("web-a", "web-b"))
    gone = node.network.attachments()[b.key]
    observed = node.reconciler.reconcile({a.key: a})
    assert list(observed) == ["observed/instance/default/web-a"]
    assert [s.name for s in node.runtime.list()] == [a.key]
    assert not (node.state / "containers" / container_id(b.key)).exists()
    assert not Path(gone.netns_path).exists()
    assert gone.veth not in os.popen("ip -o link").read()


def test_cgroup_limits_follow_resources(node) -> None:
    spec = node.spec("web-a", 2, memory=48 << 20)
    node.converge({spec.key: spec}, running("web-a"))
    cid = container_id(spec.key)
    cgroup = node.runtime.cgroup(cid)
    limit = Path(f"/sys/fs/cgroup/memory/{cgroup}/memory.limit_in_bytes")
    quota = Path(f"/sys/fs/cgroup/cpu/{cgroup}/cpu.cfs_quota_us")
    if not limit.exists():  # a cgroup v2 host
        limit, quota = Path(f"/sys/fs/cgroup/{cgroup}/memory.max"), None
    assert int(limit.read_text()) == 48 << 20
    if quota is not None:
        assert int(quota.read_text()) == 10_000  # 100 millicores of a 100 ms period


def test_out_of_memory_is_the_reason(node) -> None:
    spec = node.spec("hog-a", 2, command="exec dd if=/dev/zero of=/dev/null bs=64M count=1", memory=16 << 20)
    key = "observed/instance/default/hog-a"
    doc = node.converge({spec.key: spec}, lambda o: o[key]["restarts"] >= 1)[key]
    assert doc["state"] == "failed"
    assert doc["reason"].startswith("killed: out of memory"), doc


def test_orphans_are_collected_on_the_first_reconcile(node) -> None:
    spec = node.spec("web-a", 2)
    node.network.attach("default/ghost", node.ip(9))
    stray = node.spec("ghost", 9)
    node.runtime.create(stray.container(node.network.attachments()[stray.key].netns_path))
    node.runtime.start(stray.key)
    node.converge({spec.key: spec}, running("web-a"))
    assert [s.name for s in node.runtime.list()] == [spec.key]
    assert list(node.network.attachments()) == [spec.key]


def test_missing_image_is_pulled_and_failure_says_why(node) -> None:
    spec = dataclasses.replace(node.spec("web-a", 2), image="127.0.0.1:1/tools/absent:1")
    doc = node.reconciler.reconcile({spec.key: spec})["observed/instance/default/web-a"]
    assert doc["state"] == "failed"
    assert doc["reason"].startswith("start failed: image 127.0.0.1:1/tools/absent:1 is not in the local "
                                    "store and pulling it failed: cannot reach registry http://127.0.0.1:1: ")
    assert node.runtime.list() == []


def test_exit_code_is_the_reason_and_no_zombie_is_left(node) -> None:
    spec = node.spec("job-a", 2, command="exit 3")
    key = "observed/instance/default/job-a"
    doc = node.converge({spec.key: spec}, lambda o: o[key]["restarts"] >= 1)[key]
    assert doc["reason"].startswith("exited with code 3; retrying in"), doc
    node.reconciler.reconcile({})
    zombies = [line for line in os.popen("ps -o stat=,ppid= -e").read().splitlines()
               if line.split()[0].startswith("Z") and int(line.split()[1]) == os.getpid()]
    assert zombies == []


def test_traffic_leaving_the_subnet_is_masqueraded(node) -> None:
    """An 'outside' namespace with no route back to the container subnet answers a container's
    ping only if the node rewrote the source to its own address."""
    from pyroute2 import IPRoute

    from ccattler.agent.net import netns

    token = node.network.bridge[2:]
    outside, host_if = f"out{token}", f"o{token}"
    third = int(token, 16) % 250
    netns.create(outside)
    ipr = IPRoute()
    try:
        peer = {"ifname": "eth0", "net_ns_fd": f"/run/netns/{outside}"}
        ipr.link("add", ifname=host_if, kind="veth", peer=peer)
        index = ipr.link_lookup(ifname=host_if)[0]
        ipr.addr("add", index=index, address=f"172.31.{third}.1", prefixlen=30)
        ipr.link("set", index=index, state="up")

        def configure() -> None:
            with IPRoute() as inside:
                eth = inside.link_lookup(ifname="eth0")[0]
                inside.addr("add", index=eth, address=f"172.31.{third}.2", prefixlen=30)
                inside.link("set", index=eth, state="up")

        netns.run_in(outside, configure)
        spec = node.spec("web-a", 2)
        node.converge({spec.key: spec}, running("web-a"))
        argv = ["ping", "-c", "1", "-W", "1", f"172.31.{third}.2"]
        ping = node.runtime.exec(spec.key, argv, timeout=5)
        assert ping.exit_code == 0, ping.stdout
        nat.remove(node.network.bridge)  # the control: without masquerade there is no answer
        assert node.runtime.exec(spec.key, argv, timeout=5).exit_code != 0
        node.network.setup()
    finally:
        if ipr.link_lookup(ifname=host_if):
            ipr.link("del", ifname=host_if)
        ipr.close()
        netns.remove(outside)


def test_network_setup_and_attach_are_idempotent(node) -> None:
    node.network.setup()
    node.network.setup()
    first = node.network.attach("default/web-a", node.ip(2))
    assert node.network.attach("default/web-a", node.ip(2)) == first
    moved = node.network.attach("default/web-a", node.ip(3))  # a new address replaces the old plumbing
    assert moved.ip == node.ip(3) and list(node.network.attachments()) == ["default/web-a"]
    with pytest.raises(NetworkError, match="not a host address of subnet"):
        node.network.attach("default/web-b", node.network.gateway)


def test_probes_report_health_and_readiness_and_restart_on_liveness(node) -> None:
    good = (Probe("liveness", "http", port=8080, path="/", every=0.2),
            Probe("readiness", "tcp", port=8080, every=0.2))
    web = dataclasses.replace(node.spec("web-a", 2), probes=good)
    bad = dataclasses.replace(node.spec("web-b", 3), probes=(
        Probe("liveness", "http", port=8080, path="/missing", every=0.2, failure_threshold=2),))
    desired = {web.key: web, bad.key: bad}
    a, b = "observed/instance/default/web-a", "observed/instance/default/web-b"
    observed = node.converge(desired, lambda o: o[a]["ready"] and o[a]["health"] == "healthy"
                             and o[b]["restarts"] >= 1)
    assert observed[b]["reason"].startswith("liveness probe failed 2 times: HTTP 404"), observed[b]
    assert observed[a]["restarts"] == 0


def test_secrets_are_mounted_read_only_from_a_tmpfs_and_gone_after(node) -> None:
    node.reconciler.secrets = lambda key: [("default/db.password", b"s3cret\n", "/run/secrets/db.password")]
    spec = dataclasses.replace(node.spec("web-a", 2), secrets=("default/db.password",))
    node.converge({spec.key: spec}, running("web-a"))
    read = node.runtime.exec(spec.key, ["cat", "/run/secrets/db.password"])
    assert read.stdout == b"s3cret\n"
    write = node.runtime.exec(spec.key, ["sh", "-c", "echo x > /run/secrets/db.password"])
    assert write.exit_code != 0
    folder = node.state / "containers" / container_id(spec.key) / "secrets"
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    assert [m[2] for m in mounts if m[1] == str(folder)] == ["tmpfs"]  # never on disk
    node.reconciler.reconcile({})
    assert str(folder) not in Path("/proc/self/mounts").read_text()


def test_a_secret_that_cannot_be_fetched_is_the_reason(node) -> None:
    def refuse(key: str) -> list:
        raise CcaError("secret default/db.password has no value yet (cca secret set default/db.password)")

    node.reconciler.secrets = refuse
    spec = dataclasses.replace(node.spec("web-a", 2), secrets=("default/db.password",))
    doc = node.reconciler.reconcile({spec.key: spec})["observed/instance/default/web-a"]
    assert doc["state"] == "failed" and "has no value yet" in doc["reason"]
    assert node.runtime.list() == []
