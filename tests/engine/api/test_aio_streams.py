"""The mutual-TLS listener runs on grpc.aio: many open slice watches hold no server thread, a watch
that ends leaves the slice hub, a blocking stream (Cluster.Watch) served from the pool ends when its
client leaves, and a coroutine stream is refused on the token listener like any agent call."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest

from ccattler.engine.api.client import ApiError
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.slice import SliceHub
from ccattler.engine.pki import NODE_LIFETIME, cert_pem, key_pem, new_key
from ccattler.engine.store import open_store


def node_client(cluster, tmp_path, node):
    key = new_key()
    cert = cluster.files.load_ca().issue(key.public_key(), name=node, kind="node", lifetime=NODE_LIFETIME)
    (tmp_path / f"{node}.crt").write_bytes(cert_pem(cert))
    (tmp_path / f"{node}.key").write_bytes(key_pem(key))
    return cluster.client(cert=str(tmp_path / f"{node}.crt"), key=str(tmp_path / f"{node}.key"))


def until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def synced(stream):
    for message in stream:
        for event in message.events if message.kind == "batch" else (message,):
            if event.kind == "synced":
                return event.revision
    raise AssertionError("stream ended before synced")


def server_threads():
    return sum(1 for t in threading.enumerate() if t.name.startswith(("cca-api", "ThreadPoolExecutor")))


def test_open_slice_watches_hold_no_server_thread_and_leave_the_hub_when_cancelled(cluster, tmp_path):
    clients = [node_client(cluster, tmp_path, f"n{i}") for i in range(30)]
    hub = cluster.server._slices
    try:
        streams = [c.agent.WatchSlice(api_pb2.WatchRequest(from_revision=0)) for c in clients]
        for stream in streams:
            synced(stream)
        before = server_threads()
        cluster.store.put("derived/placement/shop/web-a1", {"service": "shop/web", "node": "n3"})
        event = next(e for m in streams[3] for e in (m.events if m.kind == "batch" else (m,)))
        assert event.key == "derived/placement/shop/web-a1"
        # 30 open watches, one of them just woken: the pool threads did not grow with them.
        assert server_threads() <= before + 2, (before, server_threads())
        assert sum(len(subs) for subs in hub._subs.values()) == 30
        for stream in streams:
            stream.cancel()
        assert until(lambda: sum(len(subs) for subs in hub._subs.values()) == 0)
    finally:
        for c in clients:
            c.close()


def test_a_blocking_stream_ends_when_its_client_leaves(cluster):
    with cluster.client() as client:
        revision = cluster.store.revision()
        stream = client.cluster.Watch(api_pb2.WatchRequest(prefix="desired/", from_revision=revision))
        cluster.store.put("desired/service/default/a", {"image": "x"})
        first = next(stream)
        assert first.key == "desired/service/default/a"
        assert until(lambda: cluster.server.metrics.streams.labels("Watch")._value.get() == 1)
        stream.cancel()
        # is_active turns false: the handler's loop ends within its 1 s poll, its finally runs.
        assert until(lambda: cluster.server.metrics.streams.labels("Watch")._value.get() == 0)


def test_slice_watch_of_a_non_node_is_refused_on_both_listeners(cluster):
    with cluster.client() as admin, pytest.raises(ApiError) as err:
        next(iter(admin.stream(admin.agent, "WatchSlice", api_pb2.WatchRequest())))
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    channel = grpc.secure_channel(cluster.server.token_listen,
                                  grpc.ssl_channel_credentials(cluster.files.ca_cert.read_bytes()))
    with pytest.raises(grpc.RpcError) as err:
        next(channel.unary_stream("/ccattler.v1.Agent/WatchSlice")(b"", timeout=5))
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    channel.close()


def test_coroutine_subscription_wakes_on_changes_without_polling():
    with open_store("sqlite://:memory:") as store:
        hub = SliceHub(store)

        async def watch():
            seen = []
            async for batch in hub.abatches("n1", 0):
                seen += [(e.kind, e.key) for e in batch]
                if ("put", "derived/firewall/n1") in seen:
                    return seen
                if seen[-1][0] == "synced":
                    await asyncio.get_running_loop().run_in_executor(
                        None, store.put, "derived/firewall/n1", {"rules": []})

        try:
            seen = asyncio.run(asyncio.wait_for(watch(), 10))
        finally:
            hub.close()
        assert seen[0] == ("synced", "") and seen[-1] == ("put", "derived/firewall/n1")
        assert sum(len(subs) for subs in hub._subs.values()) == 0


def test_a_tunnel_is_a_coroutine_carrying_a_session_both_ways(cluster, tmp_path):
    import queue

    client = node_client(cluster, tmp_path, "t1")
    ups: queue.Queue = queue.Queue()

    def requests():
        while (up := ups.get()) is not None:
            yield up

    try:
        downs = client.agent.Tunnel(requests())
        assert until(lambda: cluster.server.tunnels.connected("t1"))
        before = server_threads()
        session = cluster.server.tunnels.open("t1", "logs", {"instance": "shop/web-a1"}, "logs of web-a1")
        opened = next(downs)
        assert opened.session == session.id and opened.open == "logs"
        ups.put(api_pb2.TunnelUp(session=session.id, data=b"hello\n"))
        ups.put(api_pb2.TunnelUp(session=session.id, closed=True))
        assert session.output.get(timeout=5)[1].data == b"hello\n"
        assert session.output.get(timeout=5)[1].closed
        assert server_threads() <= before + 1  # no reader thread, no stream thread
        ups.put(None)  # the agent closes its tunnel
        assert until(lambda: not cluster.server.tunnels.connected("t1"))
    finally:
        ups.put(None)
        client.close()


def test_coroutine_handlers_store_waits_are_not_queued_behind_a_few_threads(cluster):
    # A heartbeat's store calls go through `asyncio.to_thread`: on etcd each waits for the cluster,
    # so 40 beats waiting at once must hold 40 threads, not queue behind the default six.
    barrier = threading.Barrier(40, timeout=10)

    async def beats():
        await asyncio.gather(*(asyncio.to_thread(barrier.wait) for _ in range(40)))

    listener = cluster.server.mtls
    asyncio.run_coroutine_threadsafe(beats(), listener._loop).result(20)  # BrokenBarrierError if queued
