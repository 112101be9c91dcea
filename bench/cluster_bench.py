"""Cluster benchmark: a real API server + runner (one process, its own store) and N simulated nodes
(sim-runtime nodes with real node certificates over mutual TLS, hosted by a few agent processes:
hollow nodes on one event loop per process, bench/hollow_agents.py, or with `--agents threads`
real `AgentLoop`s) — apply generated services through the real apply path and measure convergence,
node failure, scale-up and the idle cluster, each figure printed beside its target.

    .venv/bin/python bench/cluster_bench.py [--nodes 50 --instances 1000] [--store sqlite|etcd|etcd3]
        [--runs 3] [--ttl 10] [--kill 1] [--json]

(also `cca benchmark …`; `cca benchmark failover runner|server …` runs bench/ha_bench.py). Times
are taken by a watch of the whole state through the API (as `cca apply --wait` sees it): an
instance counts as running when its `observed/instance` says `running` on the node its placement
names. Sim containers start at once (`--start-delay`), so the
figures are the orchestrator's part, not container start-up.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).parent))
from cluster_parts import NodeSpec, cluster_nodes, services_text  # noqa: E402

PARTS = Path(__file__).parent / "cluster_parts.py"
#: Targets by size (nodes, instances) → apply → all running, seconds.
CONVERGE_TARGETS = {(50, 1000): 5.0, (200, 5000): 20.0, (1000, 10000): 60.0}
REPLACE_TARGET = 3.0
IDLE_WRITES_TARGET = 200.0
#: Issue 13: idle, server + runner CPU ≤ 10 % of a core (the older ≤ 5 % was the runner's alone).
IDLE_CONTROL_PLANE_CPU_TARGET = 0.10
RSS_TARGET = 2 << 30


def _cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` in seconds (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Hosts(NamedTuple):
    """How the simulated nodes are hosted: `kind` hollow|threads, nodes per process, start spread (s).
    (A NamedTuple, not a dataclass: tests and `cca benchmark` load this file without a module name
    in sys.modules, which dataclasses need.)"""

    kind: str
    per_process: int
    spread: float


class Cluster:
    """Starts the server process, the agent processes and the admin client; `close()` ends all."""

    def __init__(self, root: Path, nodes: list[NodeSpec], store: str, ttl: float, kill: int,
                 tick: float, start_delay: float, hosts: Hosts) -> None:
        from ccattler.engine.api.client import Client
        from ccattler.engine.clientconfig import Context
        from ccattler.engine.pki import NODE_LIFETIME, cert_pem, init_cluster, key_pem, new_key

        self.root, self.nodes, self.procs = root, nodes, []
        self._etcd = None
        if store == "etcd":
            from ccattler.engine.store.etcd_process import EtcdProcess

            self._etcd = EtcdProcess().start()  # its own temporary data directory
            url = self._etcd.url
        elif store == "etcd3":
            from ccattler.engine.store.etcd_process import EtcdCluster

            self._etcd = EtcdCluster(3).start()  # three members on loopback, one data dir each
            url = self._etcd.url
        else:
            url = f"sqlite://{root}/state.db"
        files = init_cluster(root / "pki", "127.0.0.1:7443")
        self.server = subprocess.Popen(
            [sys.executable, str(PARTS), "serve", "--store", url, "--pki", str(files.root),
             "--nodes", str(len(nodes))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            stderr=(root / "server.log").open("w"))
        self.procs.append(self.server)
        self.listen = json.loads(self.server.stdout.readline())["listen"]
        ca = files.load_ca()
        certs = root / "certs"
        certs.mkdir()
        for spec in nodes:
            key = new_key()
            (certs / f"{spec.name}.key").write_bytes(key_pem(key))
            cert = ca.issue(key.public_key(), name=spec.name, kind="node", lifetime=NODE_LIFETIME)
            (certs / f"{spec.name}.crt").write_bytes(cert_pem(cert))
        admin = Context(name="bench", server=self.listen, ca=str(files.ca_cert),
                        cert=str(files.admin_cert), key=str(files.admin_key))
        self.client = Client(admin, timeout=300)
        # The victims (the first `kill` nodes) get a process of their own, so killing it kills them only.
        groups = [nodes[:kill]] if kill else []
        rest = nodes[kill:]
        per = math.ceil(len(rest) / max(1, math.ceil(len(rest) / hosts.per_process)))
        groups += [rest[i:i + per] for i in range(0, len(rest), per)]
        self.agents = []
        for g, group in enumerate(groups):
            nodes_file = root / f"nodes-{g}.json"
            nodes_file.write_text(json.dumps([asdict(spec) for spec in group]))
            proc = subprocess.Popen(
                [sys.executable, str(PARTS), "agents", "--server", self.listen, "--ca", str(files.ca_cert),
                 "--certs", str(certs), "--nodes-file", str(nodes_file), "--ttl", str(ttl),
                 "--tick", str(tick), "--start-delay", str(start_delay), "--spread", str(hosts.spread),
                 *(["--hollow"] if hosts.kind == "hollow" else [])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                stderr=(root / f"agents-{g}.log").open("w"))
            self.procs.append(proc)
            self.agents.append(proc)
        for proc in self.agents:
            assert proc.stdout.readline().strip() == "ready"
        self.victims = [spec.name for spec in nodes[:kill]]

    def apply(self, text: str) -> None:
        from ccattler.dsl.sources import Source

        self.client.apply([Source("bench.cca", text)])

    def ask(self, op: str, **request) -> dict:
        """One request to the server process (its view of the store, or its stats)."""
        self.server.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.server.stdin.flush()
        answer = json.loads(self.server.stdout.readline())
        if "error" in answer:
            raise RuntimeError(f"{op}: {answer['error']}")
        return answer

    def profile(self, prefix: str) -> list[subprocess.Popen]:
        """py-spy (the thread holding the GIL, i.e. where the CPU goes; raw folded stacks) on the server
        and on one agent process."""
        spy = Path(sys.executable).parent / "py-spy"
        return [subprocess.Popen([str(spy), "record", "--gil", "--nonblocking", "-p", str(proc.pid),
                                  "-r", "100", "-f", "raw", "-o", f"{prefix}.{what}.txt"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for what, proc in (("server", self.server), ("agents", self.agents[-1]))]

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far of the server process and of all live agent processes."""
        used = _cpu_seconds
        return used(self.server.pid), sum(used(p.pid) for p in self.agents if p.poll() is None)

    def etcd_cpu(self) -> dict[str, float]:
        """CPU seconds so far of each etcd member (`etcd1`…; empty on SQLite)."""
        if self._etcd is None:
            return {}
        members = getattr(self._etcd, "members", [self._etcd])
        return {f"etcd{i + 1}": _cpu_seconds(member.pid) if member.pid else 0.0
                for i, member in enumerate(members)}

    def kill_victims(self) -> float:
        os.kill(self.agents[0].pid, signal.SIGKILL)
        return time.monotonic()

    def close(self) -> None:
        self.client.close()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    proc.stdin.write('{"op": "quit"}\n')
                    proc.stdin.close()
                except (BrokenPipeError, OSError):
                    pass
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._etcd is not None:
            self._etcd.stop()


def converge(cluster: Cluster, text: str, expected: int, timeout: float, verbose: bool = False) -> dict:
    """Apply `text` through the API; the server's view says when everything runs."""
    cluster.ask("mark", verbose=verbose)
    cpu0, etcd0 = cluster.cpu(), cluster.etcd_cpu()
    t0 = time.monotonic()
    cluster.apply(text)
    applied = time.monotonic()
    figures = cluster.ask("converge", t0=t0, expected=expected, timeout=timeout, verbose=verbose)
    cpu1 = cluster.cpu()
    figures["server_cpu_s"], figures["agents_cpu_s"] = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    figures["etcd_cpu_s"] = {name: seconds - etcd0[name] for name, seconds in cluster.etcd_cpu().items()}
    if verbose:
        print("timeline (s after apply: first, last, events): " + "; ".join(
            f"{k} {a:.2f} {b:.2f} {n}" for k, (a, b, n) in figures.pop("timeline").items()), file=sys.stderr)
    return {"apply_call": applied - t0, **figures}


def fail_nodes(cluster: Cluster, ttl: float, timeout: float) -> dict:
    """SIGKILL the victims' agent process (no clean shutdown)."""
    cluster.ask("affected", victims=cluster.victims)
    t_kill = cluster.kill_victims()
    return cluster.ask("failure", victims=cluster.victims, t_kill=t_kill, ttl=ttl, timeout=timeout)


def idle(cluster: Cluster, seconds: float) -> dict:
    """Store revisions (= write transactions) per second and CPU of server and runner, nothing changing."""
    time.sleep(2.0)  # let the last reports and ticks finish
    rev0, s0, etcd0 = cluster.client.json("Health")["revision"], cluster.ask("stats"), cluster.etcd_cpu()
    t0 = time.monotonic()
    time.sleep(seconds)
    rev1, s1, etcd1 = cluster.client.json("Health")["revision"], cluster.ask("stats"), cluster.etcd_cpu()
    span = time.monotonic() - t0
    runner = (s1["runner_cpu"] - s0["runner_cpu"]) / span
    return {"writes_per_s": (rev1 - rev0) / span, "runner_cpu": runner,
            "server_cpu": (s1["cpu"] - s0["cpu"]) / span - runner,
            "etcd_cpu": {name: (seconds - etcd0[name]) / span for name, seconds in etcd1.items()}}


def one_run(args: argparse.Namespace) -> dict:
    nodes = cluster_nodes(args.nodes)
    with tempfile.TemporaryDirectory(prefix="cca-cluster-bench-") as tmp:
        started = time.monotonic()
        hosts = Hosts(args.agents, args.nodes_per_process or (250 if args.agents == "hollow" else 25),
                      min(10.0, len(nodes) / 100) if args.spread is None else args.spread)
        cluster = Cluster(Path(tmp), nodes, args.store, args.ttl, args.kill, args.tick, args.start_delay,
                          hosts)
        try:
            cluster.ask("nodes", count=len(nodes), timeout=args.timeout)
            figures: dict = {"nodes": len(nodes), "store": args.store,
                             "startup": time.monotonic() - started}
            spies = cluster.profile(args.profile) if args.profile else []
            text, count = services_text(args.instances)
            figures["instances"] = count
            figures["converge"] = converge(cluster, text, count, args.timeout, args.verbose)
            for spy in spies:
                spy.send_signal(signal.SIGINT)
                spy.wait()
            if not args.no_scale_up:
                text, scaled = services_text(args.instances, 1.5)
                scale_up = converge(cluster, text, scaled, args.timeout, args.verbose)
                figures["scale_up"] = {"instances": scaled, **scale_up}
            spies = cluster.profile(args.profile_idle) if args.profile_idle else []
            figures["idle"] = idle(cluster, args.idle)
            for spy in spies:
                spy.send_signal(signal.SIGINT)
                spy.wait()
            if args.kill:
                figures["failure"] = fail_nodes(cluster, args.ttl, args.timeout)
            stats = cluster.ask("stats")
            if args.verbose:
                print(json.dumps(stats["controllers"], indent=1), file=sys.stderr)
            figures["server_peak_rss"] = stats["peak_rss"]
            figures["server_cpu_total"] = stats["cpu"]
            return figures
        finally:
            cluster.close()
            if args.logs:
                Path(args.logs).mkdir(parents=True, exist_ok=True)
                for log in Path(tmp).glob("*.log"):
                    shutil.copy(log, Path(args.logs) / log.name)


def _median_of(runs: list[dict]) -> dict:
    """Field-wise median over runs (numbers), first run's value otherwise."""
    out: dict = {}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            out[key] = _median_of([r[key] for r in runs])
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in runs)
        else:
            out[key] = value
    return out


def report(fig: dict, runs: int, ttl: float) -> str:
    size = (fig["nodes"], fig["instances"])
    target = CONVERGE_TARGETS.get(size)
    c, s, i = fig["converge"], fig.get("scale_up"), fig["idle"]
    control = i["runner_cpu"] + i["server_cpu"]

    def row(what: str, value: str, goal: str, ok: bool | None) -> str:
        mark = "" if ok is None else ("met" if ok else "MISSED")
        return f"  {what:<46} {value:>12}   target {goal:<16} {mark}"

    lines = [f"{fig['nodes']} nodes / {fig['instances']} instances, store {fig['store']}, "
             f"median of {runs} run(s); cluster start-up {fig['startup']:.1f} s",
             row("apply → all running (total)", f"{c['total']:.2f} s",
                 f"≤ {target:g} s" if target else "—", c["total"] <= target if target else None),
             row("  per instance p50 / p99", f"{c['p50']:.2f}/{c['p99']:.2f} s", "—", None),
             row("  the Apply call returned / all placed at",
                 f"{c['apply_call']:.2f}/{c['all_placed']:.2f} s", "—", None),
             row("  CPU used meanwhile: server+runner / agents",
                 f"{c['server_cpu_s']:.1f}/{c['agents_cpu_s']:.1f} s", "—", None),
             *([row("  CPU used meanwhile: each etcd member",
                    "/".join(f"{v:.1f}" for v in c["etcd_cpu_s"].values()) + " s", "—", None)]
               if c.get("etcd_cpu_s") else []),
             *([row(f"scale-up +50% ({s['instances']} instances) → all running", f"{s['total']:.2f} s",
                    "—", None),
                row("  per instance p50 / p99", f"{s['p50']:.2f}/{s['p99']:.2f} s", "—", None)] if s else []),
             row("idle: store writes/s", f"{i['writes_per_s']:.1f}", f"≤ {IDLE_WRITES_TARGET:g}",
                 i["writes_per_s"] <= IDLE_WRITES_TARGET),
             row("idle: server + runner CPU (of one core)", f"{control * 100:.1f} %",
                 f"≤ {IDLE_CONTROL_PLANE_CPU_TARGET * 100:g} %", control <= IDLE_CONTROL_PLANE_CPU_TARGET),
             row("  of it the runner / the API server",
                 f"{i['runner_cpu'] * 100:.1f}/{i['server_cpu'] * 100:.1f} %", "—", None),
             *([row("idle: each etcd member's CPU",
                    "/".join(f"{v * 100:.1f}" for v in i["etcd_cpu"].values()) + " %", "—", None)]
               if i.get("etcd_cpu") else []),
             row("server + runner peak RSS", f"{fig['server_peak_rss'] / 2**20:.0f} MiB", "≤ 2048 MiB",
                 fig["server_peak_rss"] <= RSS_TARGET)]
    if "failure" in fig:
        f = fig["failure"]
        lines += [row(f"node loss ({f['killed_nodes']:g} killed, {f['affected']:g} instances): detection",
                      f"{f['detection']:.2f} s", f"≤ {ttl:g} s (TTL)", f["detection"] <= ttl),
                  row("  detection → all running elsewhere", f"{f['replacement']:.2f} s",
                      f"≤ {REPLACE_TARGET:g} s", f["replacement"] <= REPLACE_TARGET),
                  row("  kill → all running elsewhere (total)", f"{f['detection'] + f['replacement']:.2f} s",
                      f"≤ {ttl + REPLACE_TARGET:g} s (TTL + 3)",
                      f["detection"] + f["replacement"] <= ttl + REPLACE_TARGET)]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=50)
    p.add_argument("--instances", type=int, default=1000)
    p.add_argument("--store", choices=("sqlite", "etcd", "etcd3"), default="sqlite",
                   help="etcd3: a 3-member etcd cluster on loopback")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--ttl", type=float, default=10.0, help="node lease TTL (seconds)")
    p.add_argument("--kill", type=int, default=1, help="nodes to kill (0: skip the failure part)")
    p.add_argument("--tick", type=float, default=1.0, help="agent loop tick (seconds)")
    p.add_argument("--start-delay", type=float, default=0.0, help="sim container start delay")
    p.add_argument("--agents", choices=("hollow", "threads"), default="hollow",
                   help="hollow: nodes on one event loop per host process (bench/hollow_agents.py); "
                        "threads: each node a real AgentLoop with its threads")
    p.add_argument("--nodes-per-process", type=int,
                   help="sim nodes per agent host process (default: 250 hollow, 25 threads)")
    p.add_argument("--spread", type=float,
                   help="the nodes' first registrations spread over [0, SPREAD) s, as agents started "
                        "together do (default: 100 nodes a second, at most 10 s)")
    p.add_argument("--idle", type=float, default=10.0, help="seconds of idle measurement")
    p.add_argument("--no-scale-up", action="store_true",
                   help="skip the +50 %% phase (idle and node loss follow the first convergence)")
    p.add_argument("--timeout", type=float, default=600.0, help="per phase (seconds)")
    p.add_argument("--profile", metavar="PREFIX",
                   help="py-spy the server and one agent process during convergence (PREFIX.server.txt, …)")
    p.add_argument("--profile-idle", metavar="PREFIX", help="the same during the idle measurement")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--logs", metavar="DIR", help="keep the server's and agents' logs here")
    p.add_argument("--verbose", action="store_true", help="print the runner's per-controller counters")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    runs = []
    for r in range(args.runs):
        runs.append(one_run(args))
        if not args.json:
            print(f"run {r + 1}/{args.runs}: apply → all running {runs[-1]['converge']['total']:.2f} s",
                  file=sys.stderr)
    figures = _median_of(runs)
    figures["runs"] = runs
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(report(figures, args.runs, args.ttl))
    return 0


if __name__ == "__main__":
    sys.exit(main())
