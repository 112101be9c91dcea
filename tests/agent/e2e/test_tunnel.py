"""Logs and exec through the API server and the agents' tunnels, on real runc: `Cluster.Logs`
follows two instances' output, `Cluster.Exec` runs a command with stdin and returns its exit code,
and `service.exec` is audited."""

from __future__ import annotations

import dataclasses
import queue
import random
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ccattler.agent.images.store import ImageStore
from ccattler.agent.loop import AgentLoop
from ccattler.agent.machine import node_document
from ccattler.agent.node import NodeCore
from ccattler.agent.reconcile import Backoff
from ccattler.agent.runtime.runc import RuncRuntime
from ccattler.engine.api.agent_client import AgentClient
from ccattler.engine.api.client import ApiError, Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2

pytestmark = pytest.mark.e2e

TALK = "i=0; while true; do echo line-$i from $HOSTNAME; i=$((i+1)); sleep 0.2; done"


def wait_for(predicate, timeout: float = 15.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return result


@pytest.fixture
def cluster(api_harness, join_node, busybox_state: Path, tmp_path: Path, clean_check):
    """An admin client, the store, and one runc node running two chatty instances of `talk`."""
    store = api_harness.store
    state = tmp_path / "state"
    subprocess.run(["cp", "-a", "--link", str(busybox_state), str(state)], check=True)
    bridge = f"ct{random.randrange(16**4):04x}"
    prefix = f"10.{random.randrange(200, 250)}.{random.randrange(256)}"
    runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
    core = NodeCore("n1", runtime, state_dir=state, bridge=bridge, backoff=Backoff(initial=0.2),
                    stop_timeout=0.5)
    loop = AgentLoop(AgentClient(join_node("n1")), core, node_document(), ttl=5, tick=0.2)
    loop.tunnel_linger = 2.0  # closes between tests' sessions: later sessions summon it again
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    admin = Client(dataclasses.replace(api_harness.context, cert=str(api_harness.files.admin_cert),
                                       key=str(api_harness.files.admin_key)), timeout=20)
    try:
        facts = {"desired/service/default/talk": {
                     "kind": "service", "tenant": "default", "name": "talk", "image": "busybox",
                     "command": TALK, "env": {}, "config": {"env": {}, "files": []},
                     "resources": {"cpu": 100, "memory": 32 << 20}, "tags": {"team": "a"}},
                 "derived/network/subnet/n1": {"node": "n1", "subnet": f"{prefix}.0/24"},
                 # what the network-policy controller writes: the agent starts nothing it has not decided
                 "derived/firewall/n1": {"node": "n1", "identities": {}, "policies": {},
                                         "open": ["default/talk", "default/pause"]}}
        for n, name in ((2, "talk-a"), (3, "talk-b")):
            facts[f"derived/placement/default/{name}"] = {"service": "default/talk", "instance": name,
                                                          "node": "n1", "revision": 1, "score": 0}
            facts[f"derived/network/ip/default/{name}"] = {"node": "n1", "ip": f"{prefix}.{n}"}
        store.txn(puts=facts)
        for name in ("talk-a", "talk-b"):
            wait_for(lambda name=name: (f := store.get(f"observed/instance/default/{name}"))
                     and f.value["state"] == "running")
        assert not api_harness.server.tunnels.connected("n1")  # opened when a session needs it
        yield admin, store
    finally:
        admin.close()
        stop.set()
        thread.join(timeout=10)
        core.shutdown(remove=True)
        clean_check(state, bridge)


def test_logs_follow_streams_lines_from_both_instances(cluster) -> None:
    admin, _ = cluster
    seen: queue.Queue[tuple[str, bytes]] = queue.Queue()
    call = admin.cluster.Logs(api_pb2.LogsRequest(target="talk", follow=True, tail=1))

    def read() -> None:
        try:
            for chunk in call:
                seen.put((chunk.instance, chunk.data))
        except Exception:  # cancelled at the end
            pass

    threading.Thread(target=read, daemon=True).start()
    lines: dict[str, list[str]] = {"default/talk-a": [], "default/talk-b": []}
    deadline = time.monotonic() + 15
    while min(len(v) for v in lines.values()) < 4:
        assert time.monotonic() < deadline, f"too few lines: {lines}"
        try:
            instance, data = seen.get(timeout=1)
        except queue.Empty:
            continue
        lines[instance] += data.decode().splitlines()
    call.cancel()
    for instance, got in lines.items():
        name = instance.split("/")[1]
        assert all(line.endswith(f"from {name}") for line in got), got
        numbers = [int(line.split()[0].removeprefix("line-")) for line in got]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)  # followed, not repeated


def test_logs_tail_without_follow_ends(cluster) -> None:
    admin, _ = cluster

    def tail() -> list:
        return list(admin.stream(admin.cluster, "Logs", api_pb2.LogsRequest(target="talk-a", tail=2)))

    wait_for(lambda: b"line-3" in b"".join(c.data for c in tail()))  # it has said enough
    chunks = tail()
    text = b"".join(c.data for c in chunks).decode()
    assert len(text.splitlines()) == 2 and {c.instance for c in chunks} == {"default/talk-a"}


def test_the_tunnel_opens_on_demand_and_closes_when_idle(cluster, api_harness) -> None:
    admin, _ = cluster
    hub = api_harness.server.tunnels

    def tail() -> bytes:
        return b"".join(c.data for c in admin.stream(admin.cluster, "Logs",
                                                     api_pb2.LogsRequest(target="talk-a", tail=1)))

    assert tail() and hub.connected("n1")  # the session summoned it
    wait_for(lambda: not hub.connected("n1"), timeout=10)  # no session for the linger time
    assert tail() and hub.connected("n1")  # and the next session summons it again


def test_exec_with_stdin_returns_the_exit_code(cluster) -> None:
    admin, store = cluster

    def inputs():  # noqa: ANN202
        yield api_pb2.ExecInput(instance="talk-a", command=["sh", "-c", "read x; echo got $x; exit 7"])
        yield api_pb2.ExecInput(stdin=b"hello\n", stdin_closed=True)

    out = list(admin.stream(admin.cluster, "Exec", inputs()))
    assert b"".join(o.stdout for o in out) == b"got hello\n"
    assert out[-1].exited and out[-1].exit_code == 7
    audit = [f.value for f in store.range("audit/")[0] if f.value.get("verb") == "Exec"]
    assert audit and "exec in talk-a: sh -c" in audit[-1]["object"]


def test_exec_refuses_a_service_name(cluster) -> None:
    admin, _ = cluster
    with pytest.raises(ApiError, match="exec needs one instance"):
        first = api_pb2.ExecInput(instance="talk", command=["true"])
        list(admin.stream(admin.cluster, "Exec", iter([first])))


def test_exec_with_a_terminal(cluster) -> None:
    admin, _ = cluster
    first = api_pb2.ExecInput(instance="talk-b", command=["sh", "-c", "tty; exit 4"], tty=True)
    out = list(admin.stream(admin.cluster, "Exec", iter([first, api_pb2.ExecInput(stdin_closed=True)])))
    assert b"".join(o.stdout for o in out).strip().startswith(b"/dev/pts/"), out
    assert out[-1].exited and out[-1].exit_code == 4


@pytest.mark.parametrize("tty", [False, True], ids=["pipes", "terminal"])
def test_an_exec_whose_client_went_away_leaves_no_process_behind(cluster, tty) -> None:
    """The client of `cca exec` goes away: the node kills the exec and the process it ran in the
    container (not left alive, nor a zombie of the agent's), so the container can still be deleted
    (the fixture's clean check at the end)."""
    admin, _ = cluster
    done = threading.Event()

    def inputs():  # noqa: ANN202
        yield api_pb2.ExecInput(instance="talk-a", command=["sleep", "304"], tty=tty)
        done.wait(30)

    call = admin.cluster.Exec(inputs())
    try:
        pids = wait_for(lambda: [int(pid) for pid, args in _processes() if args == "sleep 304"])
    finally:
        call.cancel()
        done.set()
    wait_for(lambda: not [pid for pid in pids if Path(f"/proc/{pid}").exists()], timeout=10)


def _processes() -> list[tuple[str, str]]:
    rows = subprocess.run(["ps", "-o", "pid=,args=", "-e"], capture_output=True, text=True).stdout
    return [tuple(line.split(None, 1)) for line in rows.splitlines() if len(line.split(None, 1)) == 2]


def test_node_inspect_and_top(cluster) -> None:
    admin, _ = cluster
    report = admin.json("NodeInspect", api_pb2.GetRequest(name="n1"))
    names = {c["name"] for c in report["runtime"]["containers"]}
    assert {"default/talk-a", "default/talk-b"} <= names and report["runtime"]["runtime"] == "runc"
    node = wait_for(lambda: [r for r in admin.json("Top", api_pb2.GetRequest(kind="nodes"))["items"]
                             if r["memory"] > 0 and r["pids"] >= 2])[0]
    assert node["name"] == "n1" and node["instances"] == 2 and node["memory_capacity"] > node["memory"]
    with pytest.raises(ApiError, match="not known"):
        admin.json("NodeInspect", api_pb2.GetRequest(name="nope"))


def test_node_inspect_dataplane_is_read_by_the_agent(cluster) -> None:
    """NodeInspect kind "dataplane": the node's agent reads its own data plane back (nftables here:
    no services or policy in this slice, so its tables are empty but named)."""
    admin, _ = cluster
    report = admin.json("NodeInspect", api_pb2.GetRequest(name="n1", kind="dataplane"))
    plane = report["dataplane"]
    assert plane["plane"] == "nftables" and plane["requested"] == "nftables" and plane["error"] is None
    assert plane["services"] == [] and plane["policies"] == [] and plane["refused"] == 0
    assert "dataplane" not in report["runtime"] and report["runtime"]["runtime"] == "runc"
    assert "dataplane" not in admin.json("NodeInspect", api_pb2.GetRequest(name="n1"))
    with pytest.raises(ApiError, match="node-inspect asks for the runtime"):
        admin.json("NodeInspect", api_pb2.GetRequest(name="n1", kind="bogus"))


PAUSE = "echo before-1; echo before-2; sleep 5; echo after-1; echo after-2; exec sleep 600"


def test_logs_since_returns_only_what_was_written_in_the_window(cluster) -> None:
    admin, store = cluster
    store.txn(puts={
        "desired/service/default/pause": {
            "kind": "service", "tenant": "default", "name": "pause", "image": "busybox", "command": PAUSE,
            "env": {}, "config": {"env": {}, "files": []}, "resources": {"cpu": 100, "memory": 32 << 20}},
        "derived/placement/default/pause-a": {"service": "default/pause", "instance": "pause-a", "node": "n1",
                                              "revision": 1, "score": 0},
        "derived/network/ip/default/pause-a": {"node": "n1", "ip": f"{_prefix(store)}.9"}})

    def text(**options) -> str:  # noqa: ANN003
        request = api_pb2.LogsRequest(target="pause-a", **options)
        return b"".join(c.data for c in admin.stream(admin.cluster, "Logs", request)).decode()

    first = wait_for(lambda: "before-2" in (t := text()) and t, timeout=30)  # before: "[cca] … not exist"
    assert "after" not in first, "the pause passed before the log was read (machine too slow?)"
    wait_for(lambda: "after-2" in text(), timeout=15)
    later = time.time() - 1.5  # inside the 5 s pause, a checkpoint interval clear of both sides
    assert text() == "before-1\nbefore-2\nafter-1\nafter-2\n"
    assert text(since_time=later) == "after-1\nafter-2\n"
    assert text(since_seconds=time.time() - later) == "after-1\nafter-2\n"
    assert text(since_seconds=time.time() - later, tail=1) == "after-2\n"  # since first, then tail
    assert text(since_seconds=3600) == "before-1\nbefore-2\nafter-1\nafter-2\n"
    with pytest.raises(ApiError, match="since_seconds must"):
        text(since_seconds=-5)


def _prefix(store) -> str:  # noqa: ANN001
    return store.get("derived/network/subnet/n1").value["subnet"].rsplit(".", 1)[0]


def _exec_on_terminal(admin, command: list[str], resize_after: bytes | None = None):  # noqa: ANN001, ANN202
    """Run `command` with -t at 33×101; once its output shows `resize_after`, resize to 40×120."""
    seen = threading.Event()
    done = threading.Event()

    def inputs():  # noqa: ANN202
        yield api_pb2.ExecInput(instance="talk-a", command=command, tty=True,
                                resize=api_pb2.WindowSize(rows=33, cols=101))
        if resize_after is not None:
            assert seen.wait(15), "the first size never showed"
            yield api_pb2.ExecInput(resize=api_pb2.WindowSize(rows=40, cols=120))
        done.wait(30)

    output = b""
    for out in admin.stream(admin.cluster, "Exec", inputs()):
        output += out.stdout
        if resize_after is not None and resize_after in output:
            seen.set()
        if out.exited:
            done.set()
            return output, out.exit_code
    done.set()
    raise AssertionError(f"no exit: {output!r}")


def _until_size(size: str) -> str:
    """Wait (up to 15 s) until the terminal is `size`, then print it: runc sizes the container's
    terminal just after starting the command, so its first looks may still see 0×0 or fail (their
    complaints go to /dev/null, not into the output compared)."""
    return (f'i=0; until [ "$(stty size 2>/dev/null)" = "{size}" ]; do i=$((i+1)); [ $i -gt 150 ] && exit 9; '
            'sleep 0.1; done; stty size')


def test_exec_terminal_starts_at_the_clients_size(cluster) -> None:
    admin, _ = cluster
    output, code = _exec_on_terminal(admin, ["sh", "-c", _until_size("33 101")])
    assert output.strip() == b"33 101" and code == 0, output


def test_exec_terminal_follows_a_resize(cluster) -> None:
    admin, _ = cluster
    script = f'{_until_size("33 101")}; {_until_size("40 120")}'
    output, code = _exec_on_terminal(admin, ["sh", "-c", script], resize_after=b"33 101")
    assert code == 0, output
    assert output.split() == [b"33", b"101", b"40", b"120"], output
