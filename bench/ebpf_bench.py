"""The eBPF data plane's costs on this machine (root): map updates (one entry, 10,000 in one batch,
one service's change with 30,000 services programmed) and new-connection set-up through a VIP
translated by the socket LB, against connecting to the backend directly, in the same run.

Run: `.venv/bin/python bench/ebpf_bench.py [--services 30000] [--connections 2000] [--rounds 3]`.
The programs are attached to a cgroup of the benchmark's own; clients are a child process in it;
backends are loopback listeners (no traffic leaves the machine). Everything is removed at the end.
The nftables plane beside it, in the same run (and throughput through a VIP, agent CPU while
services churn): bench/dataplane_bench.py, which reuses `map_updates` below.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend
from ccattler.agent.dataplane.ebpf import EbpfDataPlane
from ccattler.bpf import maps
from ccattler.bpf.loader import cgroup2_root

CLIENT = """
import os, socket, sys, time
open(sys.argv[1], 'w').write(str(os.getpid()))
def run(host, port, n):
    times = []
    for _ in range(n):
        t = time.perf_counter_ns()
        s = socket.create_connection((host, port)); s.recv(1)
        times.append(time.perf_counter_ns() - t); s.close()
    times.sort(); return times[len(times) // 2], times[len(times) * 99 // 100]
n = int(sys.argv[4])
for _ in range(2):  # interleaved, so load on the machine hits both alike
    print("vip", *run(sys.argv[2], 80, n)); print("direct", *run("127.0.0.2", int(sys.argv[3]), n))
"""


def _listener() -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.2", 0))
    s.listen(1024)

    def serve() -> None:
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            c.sendall(b"x")
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    return s


def _services(n: int, backend: Backend) -> dict[Frontend, tuple[Backend, ...]]:
    base = int(ipaddress.IPv4Address("10.200.0.0"))
    return {Frontend(str(ipaddress.IPv4Address(base + i)), 80, "tcp"): (backend,) for i in range(n)}


def map_updates(plane: EbpfDataPlane, rounds: int) -> dict[str, float]:
    """Kernel writes through the plane's typed wrapper (bpf/syscall.py): one `cca_services` entry
    per bpf() call (median of 200, µs), and 10,000 `cca_backends` entries in one batched update
    (median of `rounds`, ms). Keys far from any service the plane programs; removed after."""
    svc, be = plane.maps["cca_services"], plane.maps["cca_backends"]
    one = []
    for i in range(200):
        t = time.perf_counter_ns()
        svc.update(maps.svc_key("10.201.0.1", 80 + i, "tcp"), maps.svc_val(60000 + i, 0))
        one.append(time.perf_counter_ns() - t)
    pairs = [(maps.backend_key(70000 + i, 0), maps.backend_val("127.0.0.2", 1)) for i in range(10_000)]
    batch = []
    for _ in range(rounds):
        t = time.perf_counter()
        be.update_many(pairs)
        batch.append(time.perf_counter() - t)
    be.delete_many([k for k, _ in pairs])
    for i in range(200):
        svc.delete(maps.svc_key("10.201.0.1", 80 + i, "tcp"))
    return {"one_us": statistics.median(one) / 1000, "batch_ms": statistics.median(batch) * 1000}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--services", type=int, default=30_000)
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tag = secrets.token_hex(3)
    cgroup = f"ccabench-{tag}/node"
    listener = _listener()
    backend = Backend("127.0.0.2", listener.getsockname()[1])
    with tempfile.TemporaryDirectory() as state:
        plane = EbpfDataPlane(f"bench-{tag}", cgroup, state)
        try:
            figures = map_updates(plane, args.rounds)
            print(f"map update, one entry: median {figures['one_us']:.1f} µs (200 updates)")
            print(f"map update, 10,000 entries in one batch: median {figures['batch_ms']:.1f} ms")
            svc, be = plane.maps["cca_services"], plane.maps["cca_backends"]

            services = _services(args.services, backend)
            for _ in range(args.rounds):
                plane.apply(DataPlaneState())
                t = time.perf_counter()
                plane.apply(DataPlaneState(services=services))
                cold = time.perf_counter() - t
                print(f"cold sync of {args.services:,} services: {cold:.2f} s")
            vip = next(iter(services))
            changes = []
            for i in range(50):
                changed = dict(services)
                changed[vip] = (backend, Backend("127.0.0.3", 1000 + i))
                t = time.perf_counter()
                plane.apply(DataPlaneState(services=changed))
                changes.append(time.perf_counter() - t)
            print(f"one service's backends changed, {args.services:,} programmed, apply (whole desired "
                  f"state diffed against the kept record): median {statistics.median(changes) * 1000:.1f} ms")
            kernel = []
            for i in range(200):
                t = time.perf_counter_ns()
                be.update_many([(maps.backend_key(1, 1), maps.backend_val("127.0.0.3", 2000 + i))])
                svc.update(maps.svc_key(vip.ip, vip.port, "tcp"), maps.svc_val(1, 2))
                kernel.append(time.perf_counter_ns() - t)
            print(f"kernel time for one service's change (slot + count writes): median "
                  f"{statistics.median(kernel) / 1000:.1f} µs")
            plane.apply(DataPlaneState(services=services))
            procs = str(plane.programs.cgroup / "cgroup.procs")
            out = subprocess.run([sys.executable, "-c", CLIENT, procs, vip.ip, str(backend.port),
                                  str(args.connections)], capture_output=True, text=True, check=True).stdout
            rows: dict[str, list[tuple[int, int]]] = {}
            for line in out.split("\n"):
                if line:
                    kind, p50, p99 = line.split()
                    rows.setdefault(kind, []).append((int(p50), int(p99)))
            for kind, vals in rows.items():
                p50 = statistics.median(v[0] for v in vals) / 1000
                p99 = statistics.median(v[1] for v in vals) / 1000
                print(f"connect+first byte, {kind}: p50 {p50:.1f} µs, p99 {p99:.1f} µs "
                      f"({args.connections} connections x 2, {args.services:,} services programmed)")
            vip_p50 = statistics.median(v[0] for v in rows["vip"])
            overhead = vip_p50 - statistics.median(v[0] for v in rows["direct"])
            print(f"VIP overhead per new connection (p50 difference): {overhead / 1000:.1f} µs")
        finally:
            plane.teardown()
            listener.close()
            for d in (cgroup2_root() / cgroup, cgroup2_root() / f"ccabench-{tag}"):
                if d.exists():
                    d.rmdir()


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("run as root: the benchmark loads BPF programs")
    main()
