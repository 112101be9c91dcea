"""Idle agent streams: what N connected, idle nodes cost the API server (threads, CPU).

    .venv/bin/python bench/stream_bench.py [--nodes 200 1000] [--idle 20] [--ttl 15] [--json]

One server process (bench/cluster_parts.py serve: `ApiServer` + `Runner` over a SQLite file) and,
in this process, N simulated nodes on one asyncio event loop: each with its own node certificate
and mutual-TLS channel registers under a lease, beats it every TTL/3 (over one Heartbeat stream,
as `AgentClient` does; `--agents old`: a call per beat) and holds its WatchSlice stream open.
The harness is one thread and a few coroutines per node, so it does not compete with the server
for the machine. Once every node has
its `synced` event, the server's thread count (/proc/<pid>/status) and CPU (utime + stime) are
read over `--idle` seconds. Measured from outside the server, so it works on any commit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import grpc

PARTS = Path(__file__).parent / "cluster_parts.py"


def _proc(pid: int) -> tuple[int, float]:
    """(threads, CPU seconds) of process `pid`."""
    threads = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("Threads:"))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return threads, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Tally:
    """What the nodes saw: call counts, heartbeat latencies (monotonic time, seconds), node-document
    events received by every watch (the fan-out), and node deletes seen by one watch (expiries)."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.beats: list[tuple[float, float]] = []

    def beat(self, sent: float) -> None:
        now = time.monotonic()
        self.beats.append((now, now - sent))

    def latencies(self, since: float, until: float = float("inf")) -> dict:
        values = sorted(d for t, d in self.beats if since <= t < until)
        if not values:
            return {}
        pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))], 3)  # noqa: E731
        return {"p50": pick(0.5), "p99": pick(0.99), "max": round(values[-1], 3), "n": len(values)}


def _pause(policy: str, attempt: int, ttl: float) -> float:
    """Seconds a node waits before retrying after its `attempt`-th failure in a row: the old
    agents' fixed pause, or the agent's own capped, fully jittered backoff (engine/api/backoff.py)."""
    if policy == "old":
        return ttl / 3
    from ccattler.engine.api.backoff import Backoff
    return Backoff(base=0.5, cap=ttl / 3).delay(attempt)


async def _node(listen: str, name: str, ca: bytes, key: bytes, cert: bytes, ttl: float,
                synced: asyncio.Event, done: asyncio.Event, tally: Tally, policy: str, spread: float,
                observer: bool) -> None:
    """One simulated node: register, beat every TTL/3 (registering again when its lease was lost,
    as an agent does), hold the slice watch open; failures are counted, not raised. With
    `policy` "new" a node starts after a uniformly random delay in [0, spread) and retries with
    the agent's backoff; "old" starts at once and retries after a fixed TTL/3."""
    from hollow_agents import run_until

    from ccattler.engine.api.gen.ccattler.v1 import api_pb2

    counts = tally.counts
    if policy != "old" and spread > 0:
        await asyncio.sleep(random.uniform(0, spread))

    channel = grpc.aio.secure_channel(listen, grpc.ssl_channel_credentials(ca, key, cert))
    register = channel.unary_unary("/ccattler.v1.Agent/RegisterNode",
                                   request_serializer=api_pb2.RegisterRequest.SerializeToString,
                                   response_deserializer=api_pb2.Lease.FromString)
    watch = channel.unary_stream("/ccattler.v1.Agent/WatchSlice",
                                 request_serializer=api_pb2.WatchRequest.SerializeToString,
                                 response_deserializer=api_pb2.Event.FromString)
    beat = channel.stream_stream("/ccattler.v1.Agent/Heartbeat",
                                 request_serializer=api_pb2.HeartbeatRequest.SerializeToString,
                                 response_deserializer=api_pb2.HeartbeatReply.FromString)
    document = json.dumps({"address": "192.0.2.1", "name": name})

    leases: list[int] = []

    async def lease() -> int:
        reply = await register(api_pb2.RegisterRequest(node_json=document, ttl_seconds=ttl), timeout=60)
        counts["registrations"] += 1
        if leases:
            counts["re-registrations"] += 1
            counts["same lease again"] += reply.lease == leases[-1]
        leases.append(reply.lease)
        return reply.lease

    async def follow() -> None:
        if os.environ.get("STREAM_BENCH_NO_WATCH"):  # diagnosis: heartbeats alone
            synced.set()
            return
        while not done.is_set():
            try:
                async for message in watch(api_pb2.WatchRequest(from_revision=0)):
                    events = message.events if message.kind == "batch" else [message]
                    for event in events:
                        if event.kind == "synced":
                            synced.set()
                        elif synced.is_set() and event.key.startswith("observed/node/"):
                            counts[f"node {event.kind}s fanned out"] += 1
                            if observer and event.kind == "delete":
                                counts["leases expired (node deletes)"] += 1
            except grpc.aio.AioRpcError as exc:
                if done.is_set():
                    return
                counts[f"watch {exc.code().name}"] += 1
                await asyncio.sleep(1)

    async def pause(seconds: float) -> bool:
        """Wait `seconds`; True when the measurement ended meanwhile."""
        try:
            await asyncio.wait_for(done.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def call_per_beat(held: int) -> None:
        # The old agents: a call per beat, given a third of the TTL; until done or a beat fails.
        while True:
            sent = time.monotonic()
            async for _ in beat(iter([api_pb2.HeartbeatRequest(lease=held)]), timeout=ttl / 3):
                counts["beats"] += 1
                tally.beat(sent)
            if await pause(max(0.0, sent + ttl / 3 - time.monotonic())):
                return

    async def one_stream(held: int, last_ok: float) -> None:
        # The agent now (engine/api/agent_client.py): every beat on one stream, each given what is
        # left of the lease (a slow server is waited for), at a fixed rate; until done or it breaks.
        stream = beat()
        try:
            while True:
                sent = time.monotonic()
                await stream.write(api_pb2.HeartbeatRequest(lease=held))
                try:
                    reply = await asyncio.wait_for(stream.read(), max(1.0, last_ok + ttl - sent))
                except TimeoutError:
                    raise ConnectionError("DEADLINE_EXCEEDED") from None
                if reply is grpc.aio.EOF:
                    raise ConnectionError("stream ended")
                counts["beats"] += 1
                tally.beat(sent)
                last_ok = time.monotonic()
                if await pause(max(0.0, sent + ttl / 3 - time.monotonic())):
                    return
        finally:
            stream.cancel()

    async def beats() -> None:
        held, failures = None, 0
        while not done.is_set():
            try:
                if not held:
                    held = await lease()
                if policy == "old":
                    return await call_per_beat(held)
                return await one_stream(held, time.monotonic())
            except ConnectionError as exc:
                counts[f"beat {exc}"] += 1
            except grpc.aio.AioRpcError as exc:
                counts[f"beat {exc.code().name}"] += 1
                if exc.code() == grpc.StatusCode.NOT_FOUND:
                    held = None  # the lease expired: register again
            failures += 1
            if await pause(_pause(policy, failures, ttl)):
                return

    await run_until(done, channel, follow(), beats())


async def _measure(listen: str, pid: int, nodes: list[tuple[bytes, bytes]], ca: bytes, ttl: float,
                   idle: float, connect_timeout: float, policy: str, spread: float) -> dict:
    done = asyncio.Event()
    synced = [asyncio.Event() for _ in nodes]
    tally = Tally()
    counts = tally.counts
    threads0, cpu0 = _proc(pid)
    started = time.monotonic()
    tasks = [asyncio.create_task(_node(listen, f"idle{i:04d}", ca, key, cert, ttl, s, done, tally, policy,
                                       spread, i == 0))
             for i, ((key, cert), s) in enumerate(zip(nodes, synced, strict=True))]
    waiting = asyncio.gather(*(s.wait() for s in synced))
    try:
        await asyncio.wait_for(waiting, connect_timeout)
    except TimeoutError:
        pass
    connected = time.monotonic() - started
    in_sync = sum(s.is_set() for s in synced)
    await asyncio.sleep(2)  # let the connection burst settle
    before = dict(counts)
    threads1, cpu1 = _proc(pid)
    own1 = sum(os.times()[:2])
    idle_from = time.monotonic()
    await asyncio.sleep(idle)
    threads2, cpu2 = _proc(pid)
    own2 = sum(os.times()[:2])
    during = {k: v - before.get(k, 0) for k, v in counts.items() if v - before.get(k, 0)}
    done.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"nodes": len(nodes), "synced": in_sync, "connected_s": round(connected, 2),
            "threads_before": threads0, "threads_idle": max(threads1, threads2),
            "idle_cpu_pct": round(100 * (cpu2 - cpu1) / idle, 1),
            "harness_cpu_pct": round(100 * (own2 - own1) / idle, 1), "idle_calls": during,
            "connect_cpu_s": round(cpu1 - cpu0, 1), "connect_calls": before,
            "beat_latency_connect": tally.latencies(started, idle_from),
            "beat_latency_idle": tally.latencies(idle_from),
            "policy": policy, "spread_s": spread if policy != "old" else 0}


def run(count: int, ttl: float, idle: float, connect_timeout: float, logs: str | None = None,
        policy: str = "new", spread: float = 0.0, profile: str | None = None) -> dict:
    from ccattler.engine.pki import NODE_LIFETIME, cert_pem, init_cluster, key_pem, new_key

    root = Path(tempfile.mkdtemp(prefix="cca-streams-"))
    server = spy = None
    try:
        files = init_cluster(root / "pki", "127.0.0.1:7443")
        server = subprocess.Popen(
            [sys.executable, str(PARTS), "serve", "--store", f"sqlite://{root}/state.db", "--pki",
             str(files.root), "--nodes", str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, stderr=(root / "server.log").open("w"))
        hello = json.loads(server.stdout.readline())
        if profile:  # py-spy over the whole run, collapsed stacks (flamegraph.pl / speedscope input)
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record",
                                    "--pid", str(hello["pid"]), "--format", "raw",
                                    "--rate", "50", "--nonblocking", "--threads",
                                    "-o", f"{profile}-{count}.txt"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ca = files.load_ca()
        nodes = []
        for i in range(count):
            key = new_key()
            cert = ca.issue(key.public_key(), name=f"idle{i:04d}", kind="node", lifetime=NODE_LIFETIME)
            nodes.append((key_pem(key), cert_pem(cert)))
        return asyncio.run(_measure(hello["listen"], hello["pid"], nodes, files.ca_cert.read_bytes(), ttl,
                                    idle, connect_timeout, policy, spread))
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()
        if server is not None:
            try:
                server.stdin.write('{"op": "quit"}\n')
                server.stdin.flush()
                server.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                server.kill()
                server.wait()
        if logs:
            Path(logs).mkdir(parents=True, exist_ok=True)
            shutil.copy(root / "server.log", Path(logs) / f"server-{count}.log")
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[200, 1000])
    p.add_argument("--idle", type=float, default=20.0, help="seconds of idle measurement")
    p.add_argument("--ttl", type=float, default=15.0, help="node lease TTL (seconds)")
    p.add_argument("--connect-timeout", type=float, default=120.0,
                   help="seconds to wait for every node's slice to sync before measuring anyway")
    p.add_argument("--logs", metavar="DIR", help="keep the server's log here")
    p.add_argument("--agents", choices=("old", "new"), default="new",
                   help="the nodes' connect/retry behaviour: 'old' all at once and a fixed TTL/3 pause "
                        "(the agents before engine/api/backoff.py), 'new' the agent's jittered backoff")
    p.add_argument("--spread", type=float, default=0.0,
                   help="with --agents new: each node starts after a random delay in [0, SPREAD) s")
    p.add_argument("--profile", metavar="PREFIX", help="py-spy the server: PREFIX-<nodes>.txt (collapsed)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    for count in args.nodes:
        figures = run(count, args.ttl, args.idle, args.connect_timeout, args.logs, args.agents, args.spread,
                      args.profile)
        if args.json:
            print(json.dumps(figures), flush=True)
            continue
        calls = ", ".join(f"{n} {k}" for k, n in sorted(figures["idle_calls"].items()))
        print(f"{count} idle nodes: {figures['synced']} synced in {figures['connected_s']} s; server "
              f"threads {figures['threads_before']} → {figures['threads_idle']}; idle server CPU "
              f"{figures['idle_cpu_pct']} % of a core over {args.idle:g} s (harness "
              f"{figures['harness_cpu_pct']} %; {calls}); beat latency while connecting "
              f"{figures['beat_latency_connect']}, idle {figures['beat_latency_idle']}; connect phase: "
              f"{figures['connect_cpu_s']} s server CPU, {figures['connect_calls']}", flush=True)

if __name__ == "__main__":
    main()
