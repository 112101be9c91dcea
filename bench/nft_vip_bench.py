"""nftables service data plane (agent/dataplane/nftables.py): endpoint change → kernel, cold sync,
restart read-back, and new-connection cost through a VIP against direct, in a scratch netns.

    .venv/bin/python -u bench/nft_vip_bench.py [--sizes 1000,10000,30000] [--changes 200] [--conns 1000]

Needs root, nft and libnftables. The benchmark re-executes itself inside a network namespace of its
own (`--inner`), so the plane drives libnftables in-process there exactly as an agent does in its
node's namespace. Services have 2 backends each (port 80 → 8080). For each size:

- cold sync: `apply` of the whole state from an empty kernel (one transaction);
- endpoint change: one random service gets one backend replaced (`apply` of the whole state with
  that one service changed): the `apply` wall time and the kernel time of its one transaction,
  p50/p99 per changed service;
- the same with every Frontend/Backend object rebuilt per change (`apply` wall time only);
- restart: a new plane over the existing table reads it back and finds nothing to do.

At the largest size, the connection test: a backend and a client in their own netns on the bridge;
`--conns` sequential connect + 1-byte reply, alternating direct to the backend and through a VIP
that is one of the programmed services (same run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import time

SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(128)
while True:
    c, _ = s.accept(); c.sendall(b"x"); c.close()
"""

CLIENT = """
import json, socket, sys, time
direct, vip, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {"direct": [], "vip": []}
for i in range(2 * n):
    name, ip, port = ("direct", direct, 8080) if i % 2 else ("vip", vip, 80)
    t = time.perf_counter()
    c = socket.create_connection((ip, port), timeout=2); c.recv(1); c.close()
    out[name].append((time.perf_counter() - t) * 1e6)
print(json.dumps(out))
"""


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def vip(i: int) -> str:
    return f"10.96.{i // 250}.{1 + i % 250}"


def backend_ip(i: int, k: int) -> str:
    n = 2 * i + k
    return f"10.{100 + n // 62500}.{(n // 250) % 250}.{2 + n % 250}"


def inner(args) -> dict:
    from ccattler.agent.dataplane import libnft
    from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend
    from ccattler.agent.dataplane.nftables import NftablesDataPlane
    from ccattler.agent.dataplane.policy_nft import PolicyError, run_command

    assert libnft.library() is not None, "libnftables did not load"
    kernel_times: list[float] = []
    fast = libnft.runner(run_command, PolicyError)

    def timed(argv, stdin=None):
        t = time.perf_counter()
        out = fast(argv, stdin)
        if list(argv) == ["nft", "-f", "-"]:
            kernel_times.append(time.perf_counter() - t)
        return out

    bridge = os.environ["BENCH_BRIDGE"]
    results: dict = {"sizes": {}}
    rng = random.Random(7)
    for size in args.sizes:
        services = {Frontend(vip(i), 80): (Backend(backend_ip(i, 0), 8080), Backend(backend_ip(i, 1), 8080))
                    for i in range(size)}
        if size == max(args.sizes):  # the service the connection test goes through
            services[Frontend(vip(0), 80)] = (Backend("10.99.0.2", 8080),)
        plane = NftablesDataPlane(bridge, "10.99.0.1", ("192.168.99.1",), run=timed)
        t = time.perf_counter()
        plane.apply(DataPlaneState(services=services))
        cold = time.perf_counter() - t
        walls, kernels = [], []
        for n in range(args.changes):
            i = rng.randrange(1, size)
            front = Frontend(vip(i), 80)
            services = dict(services)
            services[front] = (services[front][0], Backend(f"10.250.{n // 250 % 250}.{2 + n % 250}", 8080))
            kernel_times.clear()
            t = time.perf_counter()
            plane.apply(DataPlaneState(services=services))
            walls.append(time.perf_counter() - t)
            kernels.append(sum(kernel_times))
        rebuilt_walls = []  # the same, with every Frontend/Backend object made anew (as a caller
        for n in range(args.changes // 4):  # that rebuilds its state from documents would)
            i = rng.randrange(1, size)
            front = Frontend(vip(i), 80)
            services = dict(services)
            services[front] = (services[front][0], Backend(f"10.251.{n // 250 % 250}.{2 + n % 250}", 8080))
            fresh = {Frontend(f.ip, f.port, f.protocol): tuple(Backend(b.ip, b.port) for b in bs)
                     for f, bs in services.items()}
            t = time.perf_counter()
            plane.apply(DataPlaneState(services=fresh))
            rebuilt_walls.append(time.perf_counter() - t)
        restarted = NftablesDataPlane(bridge, "10.99.0.1", ("192.168.99.1",), run=timed)
        kernel_times.clear()
        t = time.perf_counter()
        restarted.apply(DataPlaneState(services=services))
        read_back = time.perf_counter() - t
        assert restarted.transactions == 0, "a restart over an identical table sent a change"
        results["sizes"][size] = {
            "cold_sync_s": cold, "elements": sum(len(b) for b in services.values()) + len(services),
            "change_wall_ms_p50": pct(walls, 0.5) * 1e3, "change_wall_ms_p99": pct(walls, 0.99) * 1e3,
            "change_kernel_ms_p50": pct(kernels, 0.5) * 1e3, "change_kernel_ms_p99": pct(kernels, 0.99) * 1e3,
            "change_rebuilt_wall_ms_p50": pct(rebuilt_walls, 0.5) * 1e3,
            "restart_read_back_s": read_back}
        print(json.dumps({size: results["sizes"][size]}), file=sys.stderr, flush=True)
        if size != max(args.sizes):
            plane.teardown()
        else:
            results["plane"] = plane
    return results


def sh(*argv: str) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True).stdout


SUBNET = "10.99.0"  # the bridge 10.99.0.1 in the node netns; server .2, client .3 on it


@contextlib.contextmanager
def topology():
    """Three scratch network namespaces: a node with a bridge (10.99.0.1/24, forwarding and bridge
    netfilter on, as an agent's node has), and a server (10.99.0.2) and a client (10.99.0.3) on it,
    each with a veth and a default route via the bridge. Yields (node, server, client, bridge) and
    removes the namespaces (and with them the veths, the bridge and any nft tables) on the way out,
    however it is left."""
    from ccattler.agent.net import netns

    sfx = secrets.token_hex(3)
    node, server, client, bridge = f"nb{sfx}", f"nbs{sfx}", f"nbc{sfx}", f"nbb{sfx}"
    made = []
    try:
        for ns in (node, server, client):
            netns.create(ns)
            made.append(ns)
        ex = ["ip", "netns", "exec"]
        sh(*ex, node, "ip", "link", "add", bridge, "type", "bridge")
        sh(*ex, node, "ip", "addr", "add", f"{SUBNET}.1/24", "dev", bridge)
        sh(*ex, node, "ip", "link", "set", bridge, "up")
        sh(*ex, node, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        sh(*ex, node, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1")
        for ns, ip in ((server, f"{SUBNET}.2"), (client, f"{SUBNET}.3")):
            host, peer = f"h{ns[-7:]}", f"p{ns[-7:]}"
            sh(*ex, node, "ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
            sh(*ex, node, "ip", "link", "set", host, "master", bridge, "up")
            sh(*ex, ns, "ip", "addr", "add", f"{ip}/24", "dev", peer)
            sh(*ex, ns, "ip", "link", "set", peer, "up")
            sh(*ex, ns, "ip", "link", "set", "lo", "up")
            sh(*ex, ns, "ip", "route", "add", "default", "via", f"{SUBNET}.1")
        yield node, server, client, bridge
    finally:
        for ns in reversed(made):
            try:
                netns.remove(ns)
            except OSError:
                pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,30000")
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--conns", type=int, default=1000)
    parser.add_argument("--inner", action="store_true")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.inner:
        results = inner(args)
        plane = results.pop("plane")
        if args.conns:
            ready = sys.stdin.readline()  # the outer process sets up the endpoints, then runs the client
            assert ready.strip() == "go"
            print(json.dumps(results), flush=True)
            sys.stdin.readline()
        else:
            print(json.dumps(results), flush=True)
        plane.teardown()
        return

    ex = ["ip", "netns", "exec"]
    procs = []
    with topology() as (node, server, client, bridge):
        try:
            procs.append(subprocess.Popen([*ex, server, sys.executable, "-c", SERVER]))
            env = dict(os.environ, BENCH_BRIDGE=bridge)
            argv = [*ex, node, sys.executable, "-u", __file__, "--inner",
                    "--sizes", ",".join(map(str, args.sizes)),
                    "--changes", str(args.changes), "--conns", str(args.conns)]
            t0 = time.time()
            inner_proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          text=True)
            procs.append(inner_proc)
            if args.conns:
                inner_proc.stdin.write("go\n")
                inner_proc.stdin.flush()
            results = json.loads(inner_proc.stdout.readline())
            if args.conns:
                out = sh(*ex, client, sys.executable, "-c", CLIENT, "10.99.0.2", vip(0), str(args.conns))
                out = json.loads(out)
                d, v = out["direct"][10:], out["vip"][10:]  # the first few warm caches up
                results["connections"] = {
                    "services": max(args.sizes), "n": len(d),
                    "direct_us_p50": statistics.median(d), "direct_us_p99": pct(d, 0.99),
                    "vip_us_p50": statistics.median(v), "vip_us_p99": pct(v, 0.99),
                    "overhead_us_p50": statistics.median(v) - statistics.median(d)}
                inner_proc.stdin.write("done\n")
                inner_proc.stdin.flush()
            inner_proc.wait(timeout=120)
            results["wall_s"] = time.time() - t0
            results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            print(json.dumps(results, indent=2))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()


if __name__ == "__main__":
    main()
