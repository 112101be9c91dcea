"""High-availability benchmark on a 3-member etcd cluster with mutual TLS (deploy/etcd/cluster.sh),
real `cca server`, `cca runner` and `cca agent --runtime sim` processes:

- `runner`: two runners (`--leader-ttl TTL`); kill -9 the leader, then measure until the other
  holds `leader/runner` and until an apply made right after the kill is placed (controllers
  running again). Target ≤ TTL + 2 s.
- `server`: `--servers` API servers (2), N simulated nodes in one agent process, two runners; kill
  -9 the server the agents use, then measure until the live servers hold every node's slice watch
  again (the sum of their `cca_api_open_streams{method="WatchSlice"}`: exactly N — one stream per
  node). Target ≤ 5 s at 200 nodes.

Both take `--servers` and `--nodes` (the runner round then applies across N nodes, default 2).

Each figure is the median of `--rounds`, printed with every process's CPU seconds over the rounds
(the processes share the machine's cores). Run:

    .venv/bin/python bench/ha_bench.py runner [--ttl 10] [--rounds 3] [--nodes 2] [--servers 1]
    .venv/bin/python bench/ha_bench.py server [--nodes 200] [--rounds 3] [--servers 2]

or the same through `cca benchmark failover runner|server …`.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).parents[1]
CCA = str(Path(sys.executable).parent / "cca")
TICK = os.sysconf("SC_CLK_TCK")


def until(predicate, what: str, timeout: float = 120.0, step: float = 0.02, detail=None):  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what.format(detail() if detail else '')}")
        time.sleep(step)
    return value


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (and its reaped children) in seconds, 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / TICK


def free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Bench:
    """The etcd cluster, the context and the processes of one benchmark run."""

    def __init__(self, tmp: Path, servers: int = 2) -> None:
        from ccattler.engine.clientconfig import free_port_pair

        self.tmp, self.procs, self.cpu = tmp, {}, {}
        self.env = os.environ | {"CCA_HOME": str(tmp / "home")}
        base = next(b for b in (random.randrange(30000, 60000, 100) for _ in range(100))
                    if all(free(b + 10 * i + j) for i in (1, 2, 3) for j in (0, 1)))
        self.etcd_dir = tmp / "etcd"
        self.url = subprocess.run(["bash", str(ROOT / "deploy/etcd/cluster.sh"), "start", str(self.etcd_dir),
                                   str(base)], check=True, capture_output=True, text=True).stdout.strip()
        ports: list[int] = []
        for _ in range(servers):  # each a pair (mutual TLS, token): no two may overlap
            ports.append(until(lambda: (p := free_port_pair()) and all(abs(p - q) > 1 for q in ports) and p,
                               "ports"))
        self.servers = [f"127.0.0.1:{port}" for port in ports]
        self.metrics = [f"127.0.0.1:{free_port_pair()}" for _ in ports]
        subprocess.run([CCA, "init", "--server", ",".join(self.servers), "--etcd", self.url], env=self.env,
                       check=True, capture_output=True)

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen([CCA, *args], env=self.env, stdout=log, stderr=log, start_new_session=True)
        self.procs[name] = proc
        return proc

    def server(self, index: int) -> subprocess.Popen:
        return self.start(f"server{index}", "server", "--listen", self.servers[index], "--metrics",
                          self.metrics[index], "--controllers", "off", "--workers", "512")

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu_seconds(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def cpu_table(self) -> str:
        cpu = dict(self.cpu)
        for name, proc in self.procs.items():
            cpu[name] = cpu.get(name, 0.0) + (cpu_seconds(proc.pid) if proc.poll() is None else 0.0)
        for member in ("m1", "m2", "m3"):
            cpu[f"etcd-{member}"] = cpu_seconds(int((self.etcd_dir / f"{member}.pid").read_text()))
        return ", ".join(f"{name} {seconds:.1f}" for name, seconds in sorted(cpu.items()))

    def client(self):  # noqa: ANN201
        from ccattler.engine.api.client import Client
        from ccattler.engine.clientconfig import load_config

        return Client(load_config(self.tmp / "home").context(None), timeout=30)

    def join_and_run_agents(self, count: int) -> None:
        from ccattler.cli.localcluster import join_nodes
        from ccattler.engine.clientconfig import load_config

        os.environ["CCA_HOME"] = str(self.tmp / "home")
        names = tuple(f"sim-{i}" for i in range(1, count + 1))
        join_nodes(load_config(self.tmp / "home").context(None), names)
        self.start("agents", "agent", "--runtime", "sim", "--sim-nodes", str(count), "--ttl", "10",
                   "--state-dir", str(self.tmp / "state"))

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["bash", str(ROOT / "deploy/etcd/cluster.sh"), "stop", str(self.etcd_dir)],
                       capture_output=True)


def service(name: str, count: int):  # noqa: ANN201
    from ccattler.dsl import Source

    return Source(f"{name}.cca", f"service {name} {{\n  image busybox\n  instances {count}\n"
                                 "  resources { cpu 10m  memory 16Mi }\n}\n")


def bench_runner(ttl: float, rounds: int, nodes: int = 2, servers: int = 1) -> None:
    from ccattler.engine.facts.keys import LEADER_RUNNER
    from ccattler.engine.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), max(servers, 1))
        store = open_store(bench.url)
        try:
            for index in range(len(bench.servers)):
                bench.server(index)
            for name in ("runner-1", "runner-2"):
                bench.start(name, "runner", "--identity", name, "--leader-ttl", str(ttl))
            until(lambda: store.get(LEADER_RUNNER), "a leader", 30)
            with bench.client() as api:
                until(lambda: _answers(api), "the API server", 30, 0.2)
                bench.join_and_run_agents(nodes)
                until(lambda: len(api.get("nodes")["items"]) == nodes, f"{nodes} nodes", 300, 0.2)
                leads, acts = [], []
                for n in range(rounds):
                    leader = store.get(LEADER_RUNNER).value["identity"]
                    api.apply([service("web", nodes + n)])
                    until(lambda n=n: _placed(store) == nodes + n, "placements", 120)
                    killed = time.monotonic()
                    bench.kill(leader)
                    api.apply([service("web", nodes + 1 + n)])  # acknowledged while no runner leads
                    until(lambda leader=leader: (f := store.get(LEADER_RUNNER)) and
                          f.value["identity"] != leader, "a new leader", ttl + 30, 0.01)
                    leads.append(time.monotonic() - killed)
                    until(lambda n=n: _placed(store) == nodes + 1 + n, "the apply placed", 60, 0.01)
                    acts.append(time.monotonic() - killed)
                    print(f"round {n + 1}: new leader {leads[-1]:.2f} s, controllers acting {acts[-1]:.2f} s "
                          "after kill -9")
                    replacement = f"runner-{3 + n}"
                    bench.start(replacement, "runner", "--identity", replacement, "--leader-ttl", str(ttl))
            print(f"runner failover (lease TTL {ttl:g} s, 3-member etcd, {len(bench.servers)} API server(s), "
                  f"{nodes} nodes, median of {rounds}): new leader "
                  f"{statistics.median(leads):.2f} s, controllers acting {statistics.median(acts):.2f} s; "
                  f"target ≤ TTL + 2 = {ttl + 2:g} s")
            print(f"CPU seconds over the run: {bench.cpu_table()}")
        finally:
            store.close()
            bench.stop()


def _placed(store) -> int:  # noqa: ANN001
    return sum(1 for f in store.range("derived/placement/")[0] if f.value.get("node"))


def _answers(api) -> bool:  # noqa: ANN001
    from ccattler.engine.facts import CcaError

    try:
        api.get("nodes")
        return True
    except CcaError:
        return False


def watch_streams(metrics: str) -> int:
    try:
        text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=2).read().decode()
    except OSError:
        return -1
    for line in text.splitlines():
        if line.startswith('cca_api_open_streams{method="WatchSlice"}'):
            return int(float(line.split()[-1]))
    return 0


def bench_server(nodes: int, rounds: int, servers: int = 2) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), servers)
        try:
            for index in range(servers):
                bench.server(index)
            for name in ("runner-1", "runner-2"):
                bench.start(name, "runner", "--identity", name)
            with bench.client() as api:
                until(lambda: _answers(api), "the API servers", 30, 0.2)
                started = time.monotonic()
                bench.join_and_run_agents(nodes)

                def counts(skip: int = -1) -> list[int]:
                    return [0 if i == skip else max(0, watch_streams(m)) for i, m in enumerate(bench.metrics)]

                until(lambda: sum(counts()) == nodes, f"{nodes} slice watches (last: {{}})", 300, 0.2, counts)
                print(f"{nodes} nodes joined and watching in {time.monotonic() - started:.1f} s")
                times = []
                for n in range(rounds):
                    current = max(range(servers), key=lambda i: counts()[i])  # where the agents are
                    killed = time.monotonic()
                    bench.kill(f"server{current}")
                    # One stream per node, exactly: a second one would be an agent (or hub) bug.
                    until(lambda current=current: sum(counts(current)) == nodes,
                          "every agent on another server (last counts: {})",
                          120, 0.02, lambda current=current: counts(current))
                    times.append(time.monotonic() - killed)
                    print(f"round {n + 1}: all {nodes} agents watching on the others {times[-1]:.2f} s "
                          f"after kill -9 of server{current} (streams per server: {counts(current)})")
                    bench.server(current)  # back, for the next round
                    until(lambda current=current: watch_streams(bench.metrics[current]) >= 0, "restart", 30)
            print(f"API server loss → every agent reconnected ({nodes} nodes, {servers} API servers, median "
                  f"of {rounds}): {statistics.median(times):.2f} s; target ≤ 5 s")
            print(f"CPU seconds over the run: {bench.cpu_table()}")
        finally:
            bench.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ha_bench.py (cca benchmark failover)",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    runner = sub.add_parser("runner")
    runner.add_argument("--ttl", type=float, default=10.0)
    runner.add_argument("--rounds", type=int, default=3)
    runner.add_argument("--nodes", type=int, default=2)
    runner.add_argument("--servers", type=int, default=1)
    server = sub.add_parser("server")
    server.add_argument("--nodes", type=int, default=200)
    server.add_argument("--rounds", type=int, default=3)
    server.add_argument("--servers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.what == "runner":
        bench_runner(args.ttl, args.rounds, args.nodes, args.servers)
    else:
        bench_server(args.nodes, args.rounds, args.servers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
