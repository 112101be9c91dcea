"""Both data planes side by side, in one run and one setup (issue 16 part 5): direct to the backend,
through a VIP translated by the nftables plane, and through the same VIP translated by the eBPF
plane's socket LB.

    .venv/bin/python -u bench/dataplane_bench.py [--services 10000] [--connections 1000] [--rounds 3]
        [--bulk-mib 1024] [--churn-steps 20] [--churn-percent 2]

Needs root, libnftables, bpftool and the BPF object (deploy/install.sh builds it). The setup is
nft_vip_bench's (`topology`): a node netns with a bridge, a server netns (10.99.0.2) and a client
netns (10.99.0.3) on it. This process joins the node netns (setns on its own thread, so the
mount namespace and with it bpffs and the cgroup tree stay the host's) and there makes both planes
the way `cca agent --dataplane` does (agent/dataplane/factory.py), fed with the documents a node
gets (`derived/vip`, `derived/endpoint` as JSON text in the agent's SliceFacts, turned into a
DataPlaneState by its StateBuilder): `--services` services of 2 backends each, plus one service
(10.96.0.1, ports 80 and 81) whose backend is the server. Both planes hold the same state at once:
the eBPF programs are attached to a cgroup of the benchmark's own, and the one client process is
moved between that cgroup (its connects are translated by connect4) and a plain sibling cgroup
(its packets to the VIP are DNATed by nftables in the node netns). Each mode's VIP connections are
checked against the plane's own hit counters (eBPF map counters, nft element counters).

Per round (modes in rotating order, `--rounds` rounds, medians quoted):
- connect + 1-byte reply, `--connections` sequential connections (p50/p99 per round, first 10 dropped);
- one bulk TCP stream of `--bulk-mib` MiB (sendall of a 4 MiB buffer, server recv_into; Gbit/s).
Then, with the `--services` services programmed in both planes:
- kernel update of 1 and of 10,000 entries: eBPF one bpf() update and one batched update
  (ebpf_bench.map_updates); nftables one `nft -f -` transaction adding 1 and 10,000 elements to
  the `slots` map (libnftables in-process, as the plane sends them);
- cold sync: `apply` of the whole state after `apply` of an empty one;
- churn: per step `--churn-percent` % of the services get one backend replaced (documents put into
  the SliceFacts, state rebuilt, plane `apply`), `--churn-steps` steps back to back; process CPU
  (getrusage, user + system, this process and its waited children) and wall time per step. Also one
  service changed per step (p50 wall). For nftables, for the eBPF maps alone, and for the eBPF plane
  as the agent makes it (maps + the nftables fallback, which gets the services too: node-originated
  connects to a VIP are not in the container cgroup).
Everything (netns with veths, bridge and nft tables, pinned programs and maps, cgroups, processes)
is removed at the end, also when the run fails.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import random
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ebpf_bench import map_updates  # noqa: E402
from nft_vip_bench import SUBNET, backend_ip, pct, topology, vip  # noqa: E402

from ccattler.agent.dataplane import libnft, policy_nft  # noqa: E402
from ccattler.agent.dataplane.base import DataPlaneState  # noqa: E402
from ccattler.agent.dataplane.ebpf import EbpfDataPlane  # noqa: E402
from ccattler.agent.dataplane.factory import ebpf_pin_name, make_dataplane  # noqa: E402
from ccattler.agent.dataplane.nft_service_table import table_name  # noqa: E402
from ccattler.agent.dataplane.state import StateBuilder  # noqa: E402
from ccattler.agent.slice_state import SliceFacts  # noqa: E402
from ccattler.bpf.loader import NodePrograms, cgroup2_root  # noqa: E402
from ccattler.engine.facts.keys import ENDPOINTS, VIPS  # noqa: E402

NODE = "dp"
SERVER_IP, GATEWAY = f"{SUBNET}.2", f"{SUBNET}.1"
MODES = ("direct", "nftables", "ebpf")

SERVER = """
import socket, threading
def listen(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(1024); return s
def short(s):
    while True:
        c, _ = s.accept(); c.sendall(b"x"); c.close()
def sink(c):
    buf, total = bytearray(4 << 20), 0
    while (k := c.recv_into(buf)):
        total += k
    c.sendall(str(total).encode()); c.close()
def bulk(s):
    while True:
        c, _ = s.accept(); threading.Thread(target=sink, args=(c,), daemon=True).start()
threading.Thread(target=bulk, args=(listen(81),), daemon=True).start()
short(listen(80))
"""

CLIENT = """
import json, os, socket, sys, time
print(os.getpid(), flush=True)
buf = memoryview(bytearray(4 << 20))
for line in sys.stdin:
    cmd, host, port, n = line.split(); port, n = int(port), int(n)
    if cmd == "conn":
        out = []
        for _ in range(n):
            t = time.perf_counter()
            c = socket.create_connection((host, port), timeout=5); c.recv(1); c.close()
            out.append((time.perf_counter() - t) * 1e6)
    else:
        c = socket.create_connection((host, port), timeout=30)
        t, left = time.perf_counter(), n
        while left > 0:
            k = min(left, len(buf)); c.sendall(buf[:k]); left -= k
        c.shutdown(socket.SHUT_WR); got = c.recv(32)
        out = time.perf_counter() - t; c.close()
        assert int(got) == n, (got, n)
    print(json.dumps(out), flush=True)
"""


def enter_netns(name: str) -> None:
    """Join netns `name` on this (the main) thread: netlink sockets and child processes made from
    here on are in it; the mount namespace stays (unlike `ip netns exec`, which remounts /sys and
    would hide bpffs and the cgroup tree)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
    finally:
        os.close(fd)


def cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def endpoint_text(i: int, ips: tuple[str, ...], ports: list[dict]) -> str:
    return json.dumps({"service": f"bench/s{i}", "ports": ports,
                       "endpoints": [{"instance": f"s{i}-{k}", "node": "elsewhere", "ip": ip}
                                     for k, ip in enumerate(ips)]})


def documents(n: int) -> SliceFacts:
    """What a node's slice holds for `n` services of 2 backends (port 80), plus service 0 (VIP
    10.96.0.1, ports 80 and 81) on the server: JSON text, decoded when read, as the agent keeps it."""
    facts = SliceFacts()
    for i in range(n + 1):
        ports = [{"port": 80, "protocol": "tcp"}] + ([{"port": 81, "protocol": "tcp"}] if i == 0 else [])
        facts.put_raw(f"{VIPS}bench/s{i}", json.dumps({"service": f"bench/s{i}", "ip": vip(i),
                                                      "range": "10.96.0.0/12", "ports": ports}))
        ips = (SERVER_IP,) if i == 0 else (backend_ip(i, 0), backend_ip(i, 1))
        facts.put_raw(f"{ENDPOINTS}bench/s{i}", endpoint_text(i, ips, ports))
    return facts


class Churn:
    """Endpoint documents changing: each step replaces one backend of `per_step` random services."""

    def __init__(self, facts: SliceFacts, n: int) -> None:
        self.facts, self.n, self.rng, self.serial = facts, n, random.Random(16), 0

    def steps(self, count: int, per_step: int) -> list[list[tuple[str, str]]]:
        """The documents of `count` steps, made before the clock starts (the agent gets them as text)."""
        out = []
        for _ in range(count):
            step = []
            for i in self.rng.sample(range(1, self.n + 1), per_step):
                self.serial += 1
                s = self.serial
                new = f"10.{200 + s // 62500 % 50}.{s // 250 % 250}.{2 + s % 250}"
                step.append((f"{ENDPOINTS}bench/s{i}",
                             endpoint_text(i, (backend_ip(i, 0), new), [{"port": 80, "protocol": "tcp"}])))
            out.append(step)
        return out


def churn(plane, builder: StateBuilder, churner: Churn, steps: int, per_step: int) -> dict:
    """Bring `plane` up to date (untimed), then `steps` steps back to back, each: put the step's
    documents, rebuild the state, `apply`. CPU and wall per step."""
    plane.apply(builder.build(churner.facts, NODE))
    todo = churner.steps(steps, per_step)
    walls = []
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    for step in todo:
        t = time.perf_counter()
        for key, text in step:
            churner.facts.put_raw(key, text)
        plane.apply(builder.build(churner.facts, NODE))
        walls.append(time.perf_counter() - t)
    cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - t0
    return {"cpu_ms_per_step": cpu / steps * 1e3, "wall_ms_per_step": wall / steps * 1e3,
            "wall_ms_p50": statistics.median(walls) * 1e3, "cpu_share": cpu / wall}


def nft_updates(run, table: str, rounds: int) -> dict[str, float]:
    """The nftables counterpart of ebpf_bench.map_updates: one transaction adding 1 element to the
    plane's `slots` map (median of 200, each deleted again untimed), and one adding 10,000 (median
    of `rounds`), through libnftables in-process as the plane sends its deltas."""
    def elems(n: int) -> str:
        return ", ".join(f"10.127.{i // 250}.{1 + i % 250} . tcp . 80 . 0 : {SERVER_IP} . 80"
                         for i in range(n))

    one = []
    for _ in range(200):
        t = time.perf_counter()
        run(["nft", "-f", "-"], f"add element ip {table} slots {{ {elems(1)} }}\n")
        one.append(time.perf_counter() - t)
        run(["nft", "-f", "-"], f"delete element ip {table} slots {{ {elems(1)} }}\n")
    many, batch = elems(10_000), []
    for _ in range(rounds):
        t = time.perf_counter()
        run(["nft", "-f", "-"], f"add element ip {table} slots {{ {many} }}\n")
        batch.append(time.perf_counter() - t)
        run(["nft", "-f", "-"], f"delete element ip {table} slots {{ {many} }}\n")
    return {"one_us": statistics.median(one) * 1e6, "batch_ms": statistics.median(batch) * 1e3}


def move(pid: int, cgroup: Path) -> None:
    (cgroup / "cgroup.procs").write_text(str(pid))


def hits(plane) -> int:
    return sum(plane.connection_counters().values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--services", type=int, default=10_000)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bulk-mib", type=int, default=1024)
    ap.add_argument("--churn-steps", type=int, default=20)
    ap.add_argument("--churn-percent", type=float, default=2.0)
    args = ap.parse_args()
    started, t_start = time.gmtime(), time.time()
    out: dict = {"args": vars(args), "kernel": platform.release(), "cpus": os.cpu_count(),
                 "date": time.strftime("%Y-%m-%d %H:%M UTC", started),
                 "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                          text=True, cwd=Path(__file__).parent).stdout.strip(),
                 "load": {"start": load()}}
    print(json.dumps(out), file=sys.stderr, flush=True)
    tag = secrets.token_hex(3)
    cg_rel = f"ccabench-{tag}/node"
    cg_root = cgroup2_root() / f"ccabench-{tag}"
    plain = cg_root / "plain"
    pin = ebpf_pin_name(cg_rel)
    procs: list[subprocess.Popen] = []
    planes: list = []
    with contextlib.ExitStack() as stack:
        state_dir = stack.enter_context(tempfile.TemporaryDirectory())
        node, server, client, bridge = stack.enter_context(topology())
        try:
            ex = ["ip", "netns", "exec"]
            procs.append(subprocess.Popen([*ex, server, sys.executable, "-c", SERVER]))
            cli = subprocess.Popen([*ex, client, sys.executable, "-u", "-c", CLIENT], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
            procs.append(cli)
            client_pid = int(cli.stdout.readline())
            plain.mkdir(parents=True)
            enter_netns(node)
            run = libnft.runner(policy_nft.run_command, policy_nft.PolicyError)

            facts = documents(args.services)
            builder = StateBuilder()
            state = builder.build(facts, NODE)
            nft = make_dataplane("nftables", NODE, bridge=bridge, gateway=GATEWAY)
            planes.append(nft)
            ebpf = EbpfDataPlane(pin, cg_rel, state_dir, host_addresses=(GATEWAY,))
            planes.append(ebpf)
            node_cg = ebpf.programs.cgroup
            nft.apply(state)
            ebpf.apply(state)
            time.sleep(1)  # the server and client are up

            def ask(cmd: str, host: str, port: int, n: int):
                cli.stdin.write(f"{cmd} {host} {port} {n}\n")
                cli.stdin.flush()
                return json.loads(cli.stdout.readline())

            conns: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
            gbits: dict[str, list[float]] = {m: [] for m in MODES}
            nbytes = args.bulk_mib << 20
            for r in range(args.rounds):
                for mode in MODES[r % 3:] + MODES[:r % 3]:
                    move(client_pid, node_cg if mode == "ebpf" else plain)
                    host = SERVER_IP if mode == "direct" else vip(0)
                    before = (hits(nft), hits(ebpf))
                    times = ask("conn", host, 80, args.connections + 10)[10:]
                    conns[mode].append((statistics.median(times), pct(times, 0.99)))
                    gbits[mode].append(nbytes * 8 / ask("bulk", host, 81, nbytes) / 1e9)
                    # each connection translated by the plane the mode names, none by the other (nft
                    # may count a connection twice: a SYN reusing a port whose old entry is closing)
                    got = (hits(nft) - before[0], hits(ebpf) - before[1])
                    n = args.connections + 11
                    ok = {"direct": got == (0, 0), "nftables": got[0] >= n and got[1] == 0,
                          "ebpf": got == (0, n)}[mode]
                    assert ok, f"{mode}: translations (nft, ebpf) {got} for {n} connections"
                    print(json.dumps({"round": r, "mode": mode, "conn_us": conns[mode][-1],
                                      "gbit_s": gbits[mode][-1]}), file=sys.stderr, flush=True)
            move(client_pid, plain)
            out["load"]["after_traffic"] = load()
            out["connect_us"] = {m: {"p50": statistics.median(v[0] for v in conns[m]),
                                     "p99": statistics.median(v[1] for v in conns[m]),
                                     "rounds_p50": [round(v[0], 1) for v in conns[m]]} for m in MODES}
            out["gbit_s"] = {m: {"median": statistics.median(v), "rounds": [round(x, 2) for x in v]}
                             for m, v in gbits.items()}

            out["updates"] = {"nftables": nft_updates(run, table_name(bridge), args.rounds),
                              "ebpf": map_updates(ebpf, args.rounds)}
            cold: dict[str, list[float]] = {"nftables": [], "ebpf": []}
            for _ in range(args.rounds):
                for name, plane in (("nftables", nft), ("ebpf", ebpf)):
                    plane.apply(DataPlaneState())
                    t = time.perf_counter()
                    plane.apply(state)
                    cold[name].append(time.perf_counter() - t)
            out["cold_sync_s"] = {k: {"median": statistics.median(v), "rounds": [round(x, 2) for x in v]}
                                  for k, v in cold.items()}
            print(json.dumps({k: out[k] for k in ("updates", "cold_sync_s")}), file=sys.stderr, flush=True)

            churner = Churn(facts, args.services)
            per_step = max(1, round(args.services * args.churn_percent / 100))
            runs: dict[str, list[dict]] = {"nftables": [], "ebpf_maps": [], "ebpf_agent": []}
            ones: dict[str, list[dict]] = {k: [] for k in runs}
            for _ in range(args.rounds):
                for name, plane in (("nftables", nft), ("ebpf_maps", ebpf)):
                    runs[name].append(churn(plane, builder, churner, args.churn_steps, per_step))
                    ones[name].append(churn(plane, builder, churner, 50, 1))
            out["load"]["after_churn"] = load()
            # The eBPF plane as `cca agent --dataplane ebpf` makes it: the same pinned maps, with the
            # nftables plane beside it (external ports, node-originated connects), which gets the
            # services too. The standalone nftables plane goes first: one table per bridge.
            nft.teardown()
            planes.remove(nft)
            for m in ebpf.maps.values():
                m.close()
            ebpf.maps = {}
            planes.remove(ebpf)
            agent = make_dataplane("ebpf", NODE, bridge=bridge, gateway=GATEWAY, state_dir=Path(state_dir),
                                   cgroup=cg_rel)
            planes.append(agent)
            for _ in range(args.rounds):
                runs["ebpf_agent"].append(churn(agent, builder, churner, args.churn_steps, per_step))
                ones["ebpf_agent"].append(churn(agent, builder, churner, 50, 1))
            out["churn"] = {"services_per_step": per_step, "steps": args.churn_steps}
            for name, rows in runs.items():
                out["churn"][name] = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
                out["churn"][name]["rounds_cpu_ms_per_step"] = [round(r["cpu_ms_per_step"], 1) for r in rows]
                out["churn"][name]["one_service_wall_ms_p50"] = statistics.median(
                    r["wall_ms_p50"] for r in ones[name])
                out["churn"][name]["one_service_cpu_ms"] = statistics.median(
                    r["cpu_ms_per_step"] for r in ones[name])
            out["load"]["end"] = load()
            out["wall_s"] = round(time.time() - t_start)
            print(json.dumps(out, indent=2))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
            for plane in planes:
                with contextlib.suppress(Exception):
                    plane.teardown()
            with contextlib.suppress(Exception):
                for problem in NodePrograms(pin, cg_rel).teardown():
                    print("cleanup:", problem, file=sys.stderr)
            for d in (plain, cg_root / "node", cg_root):
                for _ in range(50):
                    try:
                        if d.exists():
                            d.rmdir()
                        break
                    except OSError:
                        time.sleep(0.1)


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("run as root: the benchmark loads BPF programs and makes network namespaces")
    main()
