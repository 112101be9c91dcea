"""Hollow nodes: many simulated agents on one asyncio event loop, for bench/cluster_bench.py.

Each node keeps the agent's own state and logic — `SliceState` folding its WatchSlice, `NodeCore`
over a `SimRuntime` reconciling it, `Reporter` diffing what to report — but its calls go over
grpc.aio coroutines instead of `AgentLoop`'s threads: its own node certificate and mutual-TLS
channel (a node's identity is its connection's certificate, so nodes cannot share a channel),
RegisterNode under a lease, one Heartbeat stream beating every TTL/3 with each beat given what is
left of the lease (as `engine.api.agent_client.Heartbeat`), a reconcile on every change of its own
and every tick, a Report of what changed. Left out because a sim node has none of them: tunnels
(logs/exec), secrets, workload identities, the data plane.

Why: `AgentLoop` holds ~6 threads per node (loop, slice pump, heartbeat and its reply pump, log
indexer, gRPC's request consumer). 1,000 nodes as 40 host processes of 25 were ~6,000 threads
polling for one GIL each on this 2-core machine, and the harness, not the control plane, set the
figure: 174 of 1,000 nodes registered in 600 s. Here a host process of any number of nodes is one
thread (plus gRPC's own).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import grpc

from ccattler.agent.node import NodeCore
from ccattler.agent.runtime.sim import SimProfile, SimRuntime
from ccattler.agent.slice_state import Reporter, SliceState
from ccattler.engine.api.agent_client import LAZY_PREFIXES, MIN_BEAT_DEADLINE, slice_events
from ccattler.engine.api.backoff import Backoff, start_delay
from ccattler.engine.api.gen.ccattler.v1 import api_pb2

log = logging.getLogger("hollow")
#: Deadline of a unary call (seconds): as long as a loaded server may need, not forever.
CALL_TIMEOUT = 60.0


class HollowNode:
    """One simulated node; `run(done)` until `done` is set. Its counters go to `counts`."""

    def __init__(self, name: str, server: str, credentials: grpc.ChannelCredentials,
                 node_doc: Mapping[str, Any], counts: Counter, *, ttl: float, tick: float,
                 container_start: float, spread: float) -> None:
        self.name, self.server, self.credentials = name, server, credentials
        self.node_doc, self.counts = dict(node_doc), counts
        self.ttl, self.tick, self.spread = ttl, tick, spread
        self.core = NodeCore(name, SimRuntime(SimProfile(start_delay=container_start)))
        self.state, self.reporter = SliceState(), Reporter()
        self.changed = asyncio.Event()  # something of this node's own arrived: reconcile now
        # Retries of the slice watch and of registering, each with its own count (as `AgentLoop`).
        self.watch_backoff = Backoff(base=1.0, cap=max(1.0, ttl))
        self.register_backoff = Backoff(base=1.0, cap=max(1.0, ttl))

    async def run(self, done: asyncio.Event) -> None:
        await asyncio.sleep(start_delay(self.spread))
        channel = grpc.aio.secure_channel(self.server, self.credentials)

        def call(kind: str, method: str, response: Any, request: Any = api_pb2.WatchRequest) -> Any:
            return getattr(channel, kind)(f"/ccattler.v1.Agent/{method}",
                                          request_serializer=request.SerializeToString,
                                          response_deserializer=response.FromString)

        self._register = call("unary_unary", "RegisterNode", api_pb2.Lease, api_pb2.RegisterRequest)
        self._heartbeat = call("stream_stream", "Heartbeat", api_pb2.HeartbeatReply, api_pb2.HeartbeatRequest)
        self._watch = call("unary_stream", "WatchSlice", api_pb2.Event)
        self._report = call("unary_unary", "Report", api_pb2.Json, api_pb2.ReportRequest)
        await run_until(done, channel, self._follow(), self._beat(), self._reconcile())

    # -- the slice ------------------------------------------------------------------------------
    async def _follow(self) -> None:
        """Fold the slice watch in; resume from the last revision when it breaks, start over on resync."""
        self.state.reset()
        while True:
            try:
                async for message in self._watch(api_pb2.WatchRequest(from_revision=self.state.revision)):
                    if not all(self._fold(event) for event in slice_events(message)):
                        break  # resync: the slice was emptied, watch again from revision 0
                else:
                    self.counts["slice watch ended"] += 1
            except grpc.aio.AioRpcError as exc:
                self.counts[f"slice watch {exc.code().name}"] += 1
                log.warning("%s: slice watch broke: %s", self.name, exc.code().name)
            await asyncio.sleep(self.watch_backoff.next())
            if not self.state.synced:
                self.state.reset()

    def _fold(self, event: dict[str, Any]) -> bool:
        """Fold one event in (as `AgentLoop._drain`); False on resync (the slice is emptied)."""
        kind = event["kind"]
        if kind == "resync":
            self.state.apply(event)
            self.counts["resync"] += 1
            return False
        if kind == "tunnel":
            self.counts["tunnel summons (ignored)"] += 1
            return True
        self.state.apply(event)
        self.watch_backoff.reset()
        if not event["key"].startswith(LAZY_PREFIXES):
            self.changed.set()
        return True

    # -- the lease ------------------------------------------------------------------------------
    async def _lease(self) -> int:
        while True:
            try:
                request = api_pb2.RegisterRequest(node_json=json.dumps(self.node_doc), ttl_seconds=self.ttl)
                reply = await self._register(request, timeout=CALL_TIMEOUT)
                self.counts["registrations"] += 1
                self.register_backoff.reset()
                return reply.lease
            except grpc.aio.AioRpcError as exc:
                self.counts[f"register {exc.code().name}"] += 1
                log.warning("%s: cannot register: %s", self.name, exc.code().name)
                await asyncio.sleep(self.register_backoff.next())

    async def _beat(self) -> None:
        """Register, then beat every TTL/3 over one stream, each beat given what is left of the
        lease; a beat that fails registers again (a live lease of the same document is kept)."""
        interval = self.ttl / 3
        while True:
            lease = await self._lease()
            last_ok = time.monotonic()
            stream = self._heartbeat()
            try:
                while True:
                    sent = time.monotonic()
                    await stream.write(api_pb2.HeartbeatRequest(lease=lease))
                    deadline = max(MIN_BEAT_DEADLINE, last_ok + self.ttl - sent)
                    reply = await asyncio.wait_for(stream.read(), deadline)
                    if reply is grpc.aio.EOF:
                        raise ConnectionError("the server ended the heartbeat stream")
                    last_ok = time.monotonic()
                    self.counts["beats"] += 1
                    await asyncio.sleep(max(0.0, sent + interval - time.monotonic()))
            except (grpc.aio.AioRpcError, ConnectionError, TimeoutError) as exc:
                why = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else type(exc).__name__
                self.counts[f"heartbeat stopped ({why})"] += 1
                log.warning("%s: heartbeat stopped (%s); registering again", self.name, why)
            finally:
                stream.cancel()

    # -- reconcile and report -------------------------------------------------------------------
    async def _reconcile(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.changed.wait(), self.tick)
            except TimeoutError:
                pass
            self.changed.clear()
            if not self.state.synced:
                continue
            batch = self.reporter.changes(self.core.apply(self.state.facts))
            if batch and await self._send(batch):
                self.reporter.sent(batch)

    async def _send(self, batch: Mapping[str, Any]) -> bool:
        """Report `batch`; True when it went through. A refused batch with deletes (an instance
        that left this node may be its new node's to report now) is sent again without them, as
        `AgentLoop._moved_on` does."""
        try:
            await self._report(_report_request(batch), timeout=CALL_TIMEOUT)
            self.counts["reports"] += 1
            return True
        except grpc.aio.AioRpcError as exc:
            self.counts[f"report {exc.code().name}"] += 1
            puts = {k: v for k, v in batch.items() if v is not None}
            if exc.code() != grpc.StatusCode.PERMISSION_DENIED or len(puts) == len(batch):
                return False
        try:
            if puts:
                await self._report(_report_request(puts), timeout=CALL_TIMEOUT)
            return True
        except grpc.aio.AioRpcError:
            return False


async def run_until(done: asyncio.Event, channel: grpc.aio.Channel, *jobs: Any) -> None:
    """Run the coroutines `jobs` until `done` is set, then cancel them and close `channel`."""
    tasks = [asyncio.create_task(job) for job in jobs]
    try:
        await done.wait()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await channel.close()


def _report_request(batch: Mapping[str, Any]) -> api_pb2.ReportRequest:
    return api_pb2.ReportRequest(observations=[
        api_pb2.Observation(key=k, value_json="" if v is None else json.dumps(v)) for k, v in batch.items()])


async def host(nodes: list[tuple[str, Mapping[str, Any], bytes, bytes]], server: str, ca: bytes, *,
               ttl: float, tick: float, container_start: float, spread: float) -> Counter:
    """Run `nodes` (name, node document, key PEM, cert PEM) until standard input closes; the counts."""
    counts: Counter = Counter()
    done = asyncio.Event()
    hollow = [HollowNode(name, server, grpc.ssl_channel_credentials(ca, key, cert), doc, counts,
                         ttl=ttl, tick=tick, container_start=container_start, spread=spread)
              for name, doc, key, cert in nodes]
    tasks = [asyncio.create_task(node.run(done)) for node in hollow]
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.read)  # until the driver closes our stdin (or kills us)
    done.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return counts
