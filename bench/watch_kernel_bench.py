"""Watch-to-kernel latency of the service data plane: an endpoint change written in the store →
the node's nftables holding it, through the whole agent path (store watch → API server slice
stream → `AgentLoop` → `NodeCore.apply` → `NftablesDataPlane.apply` → one `nft` transaction).

    .venv/bin/python -u bench/watch_kernel_bench.py [--sizes 1000,10000,30000] [--changes 60] [--tick 1.0]

Needs root, nft and libnftables (runc is only looked up: no container runs). Re-executes itself
inside a scratch network namespace of its own (`--inner`), where it runs, in one process as a
test harness does, a real `ApiServer` on a SQLite store (no controllers: the benchmark writes the
derived documents itself, as the VIP and endpoint controllers would) and a real agent loop with
the runc runtime and the nftables plane, joined with a token and a certificate. Per size:

- N services, each a `derived/vip` document (port 80) and a `derived/endpoint` document with two
  backends; the agent's first apply programs them all (reported as the cold start);
- `--changes` times, after a random pause (so a change lands anywhere in the agent's tick): one
  random service gets one backend replaced (`store.txn`), and the clock runs from before that
  write until the plane's `apply` that carries the new backend has returned (the `nft`
  transaction is committed when it returns). Every 10th change is also checked in the kernel
  itself (`nft get element … slots`), untimed;
- p50 / p99 / max of those latencies.

The agent and the API server share one process (and so the GIL) here; as separate processes
they would contend less, so these figures err on the slow side.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nft_vip_bench import backend_ip, pct, vip  # noqa: E402  (the same address plan)

NODE = "wk"
SUBNET = "10.99.0.0/24"
PORTS = [{"port": 80, "protocol": "tcp"}]


def vip_doc(i: int) -> dict:
    return {"service": f"bench/s{i}", "ip": vip(i), "range": "10.96.0.0/12", "ports": PORTS}


def endpoint_doc(i: int, ips: tuple[str, ...]) -> dict:
    return {"service": f"bench/s{i}", "ports": PORTS,
            "endpoints": [{"instance": f"s{i}-{k}", "node": "elsewhere", "ip": ip}
                          for k, ip in enumerate(ips)]}


class Watcher:
    """Wraps the plane's `apply`: the time each one returned and the state it enforced."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.applied: list[tuple[float, object]] = []
        self.kernel_s: list[float] = []
        self.arrived: dict[str, float] = {}  # key → when the agent's watch thread queued it
        self.sync_starts: list[float] = []   # when each `_sync_dataplane` began (state build + apply)

    def follow(self, loop, core) -> None:  # noqa: ANN001
        """Also note when events reach the agent and when each data-plane sync starts."""
        events, arrived = loop._events, self.arrived
        put = events.put

        def queued(item, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
            if item[1] is not None and "key" in item[1]:
                arrived[item[1]["key"]] = time.perf_counter()
            return put(item, *a, **kw)

        events.put = queued
        sync = core._sync_dataplane

        def timed_sync(facts):  # noqa: ANN001, ANN202
            self.sync_starts.append(time.perf_counter())
            return sync(facts)

        core._sync_dataplane = timed_sync

    def wrap(self, plane) -> None:  # noqa: ANN001
        original = plane.apply

        def apply(state):  # noqa: ANN001, ANN202
            start = time.perf_counter()
            original(state)
            done = time.perf_counter()
            with self.cond:
                self.applied.append((done, state))
                self.kernel_s.append(done - start)
                self.cond.notify_all()

        plane.apply = apply

    def wait(self, since: float, holds, timeout: float = 60.0) -> float:  # noqa: ANN001
        """The return time of the first apply after `since` whose state `holds(state)`."""
        deadline = time.perf_counter() + timeout
        with self.cond:
            while True:
                for done, state in reversed(self.applied):
                    if done < since:
                        break
                    if holds(state):
                        return done
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError("the change never reached the plane")
                self.cond.wait(left)


def inner(args: argparse.Namespace) -> dict:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    results: dict = {"tick_s": args.tick, "sizes": {}}
    rng = random.Random(7)
    for size in args.sizes:
        results["sizes"][size] = one_size(size, args, rng)
        print(json.dumps({size: results["sizes"][size]}), file=sys.stderr, flush=True)
    return results


def one_size(size: int, args: argparse.Namespace, rng: random.Random) -> dict:
    from ccattler.agent.dataplane.base import Frontend
    from ccattler.agent.dataplane.nft_service_table import table_name
    from ccattler.agent.images.store import ImageStore
    from ccattler.agent.loop import AgentLoop
    from ccattler.agent.machine import node_document
    from ccattler.agent.node import NodeCore
    from ccattler.agent.runtime.runc import RuncRuntime
    from ccattler.engine.api.agent_client import AgentClient
    from ccattler.engine.api.client import Client
    from ccattler.engine.api.gen.ccattler.v1 import api_pb2
    from ccattler.engine.api.server import ApiServer, ServerOptions
    from ccattler.engine.auth import create_token
    from ccattler.engine.clientconfig import Context
    from ccattler.engine.pki import init_cluster, key_pem, make_csr, new_key
    from ccattler.engine.store import open_store

    tmp = Path(tempfile.mkdtemp(prefix="wkbench-"))
    bridge = f"wkb{secrets.token_hex(3)}"
    cgroup = f"ccawk{secrets.token_hex(3)}"
    store = open_store(f"sqlite://{tmp}/state.db")
    files = init_cluster(tmp / "pki", "127.0.0.1:7443")
    server = ApiServer(store, files, ServerOptions(listen="127.0.0.1:0", token_listen="127.0.0.1:0",
                                                   metrics_listen=None)).start()
    stop, loop_thread, core, client = threading.Event(), None, None, None
    try:
        context = Context(name="bench", server=server.listen, token_server=server.token_listen,
                          ca=str(files.ca_cert), cert=None, key=None)
        key = new_key()
        with Client(context, anonymous=True) as anon:
            reply = anon.unary(anon.agent, "Join", api_pb2.JoinRequest(
                token=create_token(store, "join", 60)[0], node=NODE, csr=make_csr(key, NODE)))
        (tmp / "node.crt").write_bytes(reply.cert)
        (tmp / "node.key").write_bytes(key_pem(key))
        node_context = dataclasses.replace(context, cert=str(tmp / "node.crt"), key=str(tmp / "node.key"))
        client = Client(node_context, timeout=30)
        backends = {i: (backend_ip(i, 0), backend_ip(i, 1)) for i in range(size)}
        puts = {f"derived/network/subnet/{NODE}": {"node": NODE, "subnet": SUBNET}}
        for i in range(size):
            puts[f"derived/vip/bench/s{i}"] = vip_doc(i)
            puts[f"derived/endpoint/bench/s{i}"] = endpoint_doc(i, backends[i])
        items = list(puts.items())
        for start in range(0, len(items), 5000):
            store.txn(puts=dict(items[start:start + 5000]))

        state = tmp / "node"
        runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc", cgroup_parent=cgroup)
        core = NodeCore(NODE, runtime, state_dir=state, bridge=bridge, dataplane="nftables")
        watcher = Watcher()
        original_make = core._make_dataplane

        def make_and_wrap():  # noqa: ANN202
            plane = original_make()
            watcher.wrap(plane)
            return plane

        core._make_dataplane = make_and_wrap
        loop = AgentLoop(AgentClient(client), core, node_document(address="127.0.0.1"), ttl=30,
                         tick=args.tick)
        watcher.follow(loop, core)
        started = time.perf_counter()
        loop_thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
        loop_thread.start()
        watcher.wait(started, lambda s: len(s.services) == size, timeout=600)
        cold = time.perf_counter() - started

        latencies, checked, parts = [], 0, []
        table = table_name(bridge)
        for n in range(args.changes):
            time.sleep(rng.uniform(0, args.tick))
            i = rng.randrange(size)
            new = f"10.250.{n // 250}.{2 + n % 250}"
            backends[i] = (backends[i][0], new)
            front = Frontend(vip(i), 80, "tcp")
            t0 = time.perf_counter()
            store.txn(puts={f"derived/endpoint/bench/s{i}": endpoint_doc(i, backends[i])})
            done = watcher.wait(t0, lambda s, f=front, ip=new: any(b.ip == ip
                                                                   for b in s.services.get(f, ())))
            latencies.append(done - t0)
            arrival = watcher.arrived.get(f"derived/endpoint/bench/s{i}", t0)
            began = max((x for x in watcher.sync_starts if x <= done), default=arrival)
            parts.append((arrival - t0, max(0.0, began - arrival), done - max(began, arrival)))
            if n % 10 == 0:  # the element itself, read from the kernel
                slots = [subprocess.run(["nft", "get", "element", "ip", table, "slots",
                                         f"{{ {vip(i)} . tcp . 80 . {k:#x} }}"],
                                        capture_output=True, text=True).stdout for k in (0, 1)]
                assert any(f"{new} . 80" in out for out in slots), (new, slots)
                checked += 1
        ms = [x * 1000 for x in latencies]
        kernel = [x * 1000 for x in watcher.kernel_s[1:]]  # the applies after the cold one
        return {"cold_start_s": round(cold, 2), "changes": len(ms), "checked_in_kernel": checked,
                "watch_to_kernel_ms_p50": round(statistics.median(ms), 1),
                "watch_to_kernel_ms_p99": round(pct(ms, 0.99), 1),
                "watch_to_kernel_ms_max": round(max(ms), 1),
                **{f"{name}_ms_p50": round(statistics.median(p[k] for p in parts) * 1000, 1)
                   for k, name in enumerate(("store_to_agent", "agent_wait", "sync"))},
                **{f"{name}_ms_p99": round(pct([p[k] for p in parts], 0.99) * 1000, 1)
                   for k, name in enumerate(("store_to_agent", "agent_wait", "sync"))},
                "plane_apply_ms_p50": round(statistics.median(kernel), 2) if kernel else None,
                "plane_apply_ms_p99": round(pct(kernel, 0.99), 2) if kernel else None}
    finally:
        stop.set()
        if loop_thread is not None:
            loop_thread.join(15)
        if core is not None:
            core.shutdown(remove=True)
        if client is not None:
            client.close()
        server.stop(0)
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)
        for path in (Path("/sys/fs/cgroup") / cgroup,):
            if path.is_dir():
                subprocess.run(["rmdir", str(path)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,30000")  # ~3 minutes in all
    parser.add_argument("--changes", type=int, default=60)
    parser.add_argument("--tick", type=float, default=1.0, help="the agent's --tick (default as cca agent's)")
    parser.add_argument("--inner", action="store_true")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.inner:
        print(json.dumps(inner(args)), flush=True)
        return
    from ccattler.agent.net import netns

    ns = f"wk{secrets.token_hex(3)}"
    netns.create(ns)
    try:
        t0 = time.time()
        out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-u", __file__, "--inner",
                              "--sizes", ",".join(map(str, args.sizes)), "--changes", str(args.changes),
                              "--tick", str(args.tick)], check=True, stdout=subprocess.PIPE, text=True)
        results = json.loads(out.stdout.strip().splitlines()[-1])
        results["wall_s"] = round(time.time() - t0, 1)
        results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        results["load"] = os.getloadavg()[0]
        print(json.dumps(results, indent=2))
    finally:
        netns.remove(ns)


if __name__ == "__main__":
    main()
