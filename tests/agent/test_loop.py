"""The agent loop against a real API server (mutual TLS, SQLite store): a sim node registers,
sees what is placed on it through its slice, and reports running instances; unplaced ones vanish."""

from __future__ import annotations

import threading
import time

from ccattler.agent.loop import AgentLoop
from ccattler.agent.machine import node_document
from ccattler.agent.node import NodeCore
from ccattler.agent.runtime.process import ProcessRuntime
from ccattler.agent.runtime.sim import SimProfile, SimRuntime
from ccattler.engine.api.agent_client import AgentClient
from ccattler.engine.secrets import LocalKeyProvider, set_secret


def wait_for(predicate, timeout: float = 10.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return result


def test_sim_agent_reports_what_its_slice_places(api, join_node) -> None:
    store, _ = api
    client = join_node("n1")
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
    assert not thread.is_alive()


def test_agent_rides_out_an_api_server_restart(api_harness, join_node) -> None:
    store = api_harness.store
    core = NodeCore("n1", SimRuntime(SimProfile(start_delay=0.0)))
    loop = AgentLoop(AgentClient(join_node("n1")), core, node_document(address="192.0.2.10"), ttl=3,
                     tick=0.1, retry=0.2)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    service = {"image": "busybox", "command": "httpd", "resources": {"cpu": 100, "memory": 1 << 20}}

    def place(name: str) -> None:
        store.put(f"derived/placement/default/{name}", {"service": "default/web", "instance": name,
                                                        "node": "n1"})

    def running(name: str) -> bool:
        fact = store.get(f"observed/instance/default/{name}")
        return fact is not None and fact.value["state"] == "running"

    try:
        store.put("desired/service/default/web", service)
        place("web-a")
        wait_for(lambda: running("web-a"))
        api_harness.restart()  # the watch and the heartbeat stream break
        place("web-b")
        wait_for(lambda: running("web-b"), timeout=20)
        wait_for(lambda: store.get("observed/node/n1") is not None)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_secrets_reach_the_instance_through_the_api(api_harness, join_node, tmp_path) -> None:
    store = api_harness.store
    keys = LocalKeyProvider.from_file(api_harness.files.master_key)
    set_secret(store, keys, "db.password", "default", b"s3cret")
    core = NodeCore("n1", ProcessRuntime(tmp_path / "node"))
    loop = AgentLoop(AgentClient(join_node("n1")), core, node_document(address="192.0.2.10"), ttl=5, tick=0.1)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        store.txn(puts={
            "desired/service/default/web": {"image": "busybox", "command": "exec sleep 30",
                                            "secrets": [{"name": "default/db.password",
                                                         "mount": "/run/secrets/db.password"}]},
            "derived/placement/default/web-a": {"service": "default/web", "instance": "web-a", "node": "n1"},
        })
        key = "observed/instance/default/web-a"
        wait_for(lambda: (f := store.get(key)) and f.value["state"] == "running")
        (folder,) = (tmp_path / "node" / "processes").iterdir()
        secret = folder / "root" / "run" / "secrets" / "db.password"
        assert secret.read_bytes() == b"s3cret" and secret.stat().st_mode & 0o777 == 0o400
    finally:
        stop.set()
        thread.join(timeout=10)
        core.shutdown(remove=True)


def test_an_instance_that_moved_to_another_node_does_not_jam_reports(api_harness, join_node) -> None:
    """n1 is cut off while web-a moves to n2 (which reports it); when n1 is back it removes web-a and
    its delete of the document n2 now owns is refused: the refusal must not block n1's reports."""
    store = api_harness.store
    core = NodeCore("n1", SimRuntime(SimProfile(start_delay=0.0)))
    loop = AgentLoop(AgentClient(join_node("n1")), core, node_document(address="192.0.2.10"), ttl=30,
                     tick=0.1, retry=0.2)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    store.put("desired/service/default/web", {"image": "busybox", "command": "httpd"})
    placement = {"service": "default/web", "instance": "web-a", "node": "n1"}
    store.put("derived/placement/default/web-a", placement)

    def doc(name: str) -> dict | None:
        fact = store.get(f"observed/instance/default/{name}")
        return fact.value if fact else None

    thread.start()
    try:
        wait_for(lambda: (d := doc("web-a")) and d["node"] == "n1" and d["state"] == "running")
        api_harness.server.stop(0)  # n1 is cut off
        store.delete("derived/placement/default/web-a")
        store.put("derived/placement/default/web-a", {"service": "default/web", "instance": "web-a",
                                                      "node": "n2"})
        store.put("observed/instance/default/web-a", {"node": "n2", "state": "running", "ip": None,
                                                      "restarts": 0, "reason": None, "health": None,
                                                      "ready": True})  # as n2 reports it
        api_harness.restart()
        wait_for(lambda: core.runtime.list() == [] and "observed/instance/default/web-a"
                 not in loop.reporter.reported, timeout=20)
        store.put("derived/placement/default/web-b", {"service": "default/web", "instance": "web-b",
                                                      "node": "n1"})
        wait_for(lambda: (d := doc("web-b")) and d["node"] == "n1")
        assert doc("web-a")["node"] == "n2"
    finally:
        stop.set()
        thread.join(timeout=10)


def test_an_agent_dropped_for_falling_behind_re_reads_its_slice_and_carries_on(api_harness, join_node,
                                                                              caplog) -> None:
    caplog.set_level("WARNING", "ccattler.agent.loop")
    store = api_harness.store
    api_harness.server._slices.max_bytes = 4096  # so a burst of shared documents outruns the agent
    core = NodeCore("n1", SimRuntime(SimProfile(start_delay=0.0)))
    agent = AgentClient(join_node("n1"))
    watch_slice, release = agent.watch_slice, threading.Event()

    def stuck_at_first(from_revision: int = 0):  # noqa: ANN202 — a node too busy to read its stream
        for event in watch_slice(from_revision):
            if event["key"].startswith("derived/endpoint/"):
                release.wait()
            yield event

    agent.watch_slice = stuck_at_first
    loop = AgentLoop(agent, core, node_document(address="192.0.2.10"), ttl=5, tick=0.1, retry=0.1)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: store.get("observed/node/n1"))
        hub = api_harness.server._slices
        [sub] = wait_for(lambda: list(hub._subs.get("n1", ())))  # the agent's slice stream
        i = 0
        while sub.dropped is None:  # write until the server gives up on it
            assert i < 5_000
            store.put(f"derived/endpoint/default/s{i % 20}", {"endpoints": [], "pad": "p" * 20_000, "i": i})
            i += 1
        last = i - 1
        release.set()
        wait_for(lambda: "watch fell behind at revision" in caplog.text)
        store.txn(puts={
            "desired/service/default/web": {"kind": "service", "tenant": "default", "name": "web",
                                            "image": "busybox", "command": "httpd", "env": {},
                                            "config": {"env": {}, "files": []},
                                            "resources": {"cpu": 100, "memory": 1 << 20}},
            "derived/placement/default/web-a": {"service": "default/web", "instance": "web-a", "node": "n1",
                                                "revision": 1, "score": 0},
        })
        instance = "observed/instance/default/web-a"
        wait_for(lambda: (f := store.get(instance)) and f.value["state"] == "running", timeout=20)
        newest = f"derived/endpoint/default/s{last % 20}"
        wait_for(lambda: (loop.state.facts.get(newest) or {}).get("i") == last)  # caught up on the state
    finally:
        stop.set()
        thread.join(timeout=5)


def test_an_idle_nodes_secret_refreshes_leave_one_audit_record(api_harness, join_node) -> None:
    """Issue 19 part 5: the refresh tick re-fetches the same values; the server records the first
    delivery and a changed one, not every tick."""
    store = api_harness.store
    keys = LocalKeyProvider.from_file(api_harness.files.master_key)
    set_secret(store, keys, "db.password", "default", b"one")
    core = NodeCore("n1", SimRuntime(SimProfile(start_delay=0.0)))
    core.reconciler.secret_refresh = 0.2  # the tick every 0.2 s instead of 15 s
    core.reconciler._next_refresh = 0.0
    loop = AgentLoop(AgentClient(join_node("n1")), core, node_document(address="192.0.2.10"), ttl=5,
                     tick=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()

    def fetches() -> list[dict]:
        return [f.value for f in store.range("audit/")[0] if f.value["verb"] == "FetchSecrets"]

    try:
        store.txn(puts={
            "desired/service/default/web": {"image": "busybox", "command": "sleep 30",
                                            "secrets": [{"name": "default/db.password", "mount": "/run/s"}]},
            "derived/placement/default/web-a": {"service": "default/web", "instance": "web-a", "node": "n1"},
        })
        instance = "observed/instance/default/web-a"
        wait_for(lambda: (f := store.get(instance)) and f.value["state"] == "running")
        coalesced = api_harness.server.audit.coalesced
        wait_for(lambda: api_harness.server.audit.coalesced >= coalesced + 10)  # ten idle refreshes
        idle = fetches()
        assert 1 <= len(idle) <= 2, idle  # the start's fetch, and the refresh's batch (another object)
        set_secret(store, keys, "db.password", "default", b"two")
        wait_for(lambda: len(fetches()) == len(idle) + 1)  # the rotated value: recorded at once
        time.sleep(1)
        assert len(fetches()) == len(idle) + 1
    finally:
        stop.set()
        thread.join(timeout=10)


def test_endpoint_changes_reach_the_data_plane_before_the_tick(api, join_node) -> None:
    """A VIP or endpoint document change is synced into the data plane (`sync_services`) at once;
    the whole reconcile still waits for the tick (30 s here: never reached by this test)."""
    store, _ = api

    class Counting(NodeCore):
        def __init__(self) -> None:
            super().__init__("n1", SimRuntime(SimProfile(start_delay=0.0)))
            self.applies, self.synced = 0, []

        def apply(self, facts):  # noqa: ANN001, ANN202
            self.applies += 1
            return super().apply(facts)

        def sync_services(self, facts) -> None:  # noqa: ANN001
            self.synced.append(facts.get("derived/endpoint/default/web"))

    core = Counting()
    loop = AgentLoop(AgentClient(join_node("n1")), core, node_document(address="192.0.2.10"), ttl=5, tick=30)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: core.applies >= 1)  # the first complete slice (and its own node document)
        time.sleep(0.5)
        applies = core.applies
        doc = {"service": "default/web", "endpoints": [{"instance": "web-a", "node": "n2", "ip": "10.1.0.2"}]}
        store.put("derived/endpoint/default/web", doc)
        wait_for(lambda: doc in core.synced)
        store.put("derived/endpoint/default/other", {"service": "default/other", "endpoints": []})
        wait_for(lambda: len(core.synced) == 2)
        assert core.applies == applies, "an endpoint change ran a whole reconcile"
    finally:
        stop.set()
        store.put("derived/endpoint/default/wake", {"endpoints": []})  # ends the 30 s wait for events
        thread.join(timeout=5)
    assert not thread.is_alive()


def test_a_jittered_start_waits_and_stopping_meanwhile_registers_nothing(monkeypatch) -> None:
    class Refusing:  # any call would be a registration or a watch before the start delay ran out
        def __getattr__(self, name):  # noqa: ANN001, ANN204
            raise AssertionError(f"{name} called during the start delay")

    core = NodeCore("n1", SimRuntime(SimProfile(start_delay=0.0)))
    core.connect = lambda client: None  # noqa: ARG005 (nothing to connect to)
    asked: list[float] = []
    monkeypatch.setattr("ccattler.agent.loop.start_delay", lambda spread: asked.append(spread) or 60.0)
    loop = AgentLoop(Refusing(), core, node_document(address="192.0.2.10"), ttl=5, start_jitter=120)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive() and asked == [120]  # waiting out the drawn delay
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_node_document_names_the_data_plane_actually_used(api, join_node) -> None:
    """`--dataplane auto` registered as ebpf (resolve_kind's guess) but fell back to nftables when
    the plane was made: the agent registers its document again, so `cca get nodes -o wide` shows
    nftables, and the new lease lives on (the old heartbeat is stopped, not left to fail)."""
    store, _ = api
    core = NodeCore("n1", SimRuntime(SimProfile(start_delay=0.0)))
    document = node_document(address="192.0.2.10", dataplane="ebpf")
    loop = AgentLoop(AgentClient(join_node("n1")), core, document, ttl=3, tick=0.1)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        first = wait_for(lambda: store.get("observed/node/n1"))
        assert first.value["dataplane"] == "ebpf"

        class Fallen:
            name = "nftables"

        core.dataplane = Fallen()  # what make_dataplane("auto", …) returned
        moved = wait_for(lambda: (f := store.get("observed/node/n1")) and f.value["dataplane"] == "nftables"
                         and f)
        assert moved.lease != first.lease
        time.sleep(4)  # past the ttl: the new lease is beaten
        assert store.get("observed/node/n1").value["dataplane"] == "nftables"
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()
