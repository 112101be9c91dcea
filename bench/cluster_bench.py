"""Cluster benchmark: a real API server + runner (one process, its own store) and N simulated nodes
(sim-runtime `AgentLoop`s with real node certificates over mutual TLS, hosted by a few agent
processes) — apply generated services through the real apply path and measure convergence, node
failure, scale-up and the idle cluster, each figure printed beside its target.

    .venv/bin/python bench/cluster_bench.py [--nodes 50 --instances 1000] [--store sqlite|etcd]
        [--runs 3] [--ttl 10] [--kill 1] [--json]

(also `cca benchmark cluster …`). Times are taken by a watch of the whole state through the API
(as `cca apply --wait` sees it): an instance counts as running when its `observed/instance` says
`running` on the node its placement names. Sim containers start at once (`--start-delay`), so the
figures are the orchestrator's part, not container start-up.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster_parts import NodeSpec, cluster_nodes, services_text  # noqa: E402

PARTS = Path(__file__).parent / "cluster_parts.py"
NODES_PER_AGENT_PROCESS = 250
#: Targets by size (nodes, instances) → apply → all running, seconds.
CONVERGE_TARGETS = {(50, 1000): 5.0, (200, 5000): 20.0, (1000, 10000): 60.0}
REPLACE_TARGET = 3.0
IDLE_WRITES_TARGET = 200.0
IDLE_RUNNER_CPU_TARGET = 0.05
RSS_TARGET = 2 << 30


class ClusterView:
    """The cluster as the benchmark's API watch sees it, with the time each change arrived."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.nodes: dict[str, float] = {}  # registered node → when
        self.node_gone: dict[str, float] = {}  # node whose observed/node vanished → when
        self.wanted: set[str] = set()  # tenant/instance that should exist
        self.placed: dict[str, str | None] = {}
        self.observed: dict[str, tuple[str, str]] = {}  # instance → (node, state)
        self.running_since: dict[str, float] = {}  # instance → when it first ran where placed
        self.placed_at: dict[str, float] = {}  # instance → when it was last placed
        self.revision = 0
        self.error: Exception | None = None
        self.unplaced_reason = ""

    def follow(self, events) -> None:
        try:
            for event in events:
                self._fold(event, time.monotonic())
        except Exception as exc:  # surfaced by the waits
            self.error = exc
            with self.cond:
                self.cond.notify_all()

    def _fold(self, event: dict, now: float) -> None:
        key, value = event["key"], event["value"]
        parts = key.split("/")
        with self.cond:
            self.revision = max(self.revision, event["revision"])
            if parts[:2] == ["observed", "node"]:
                if value is None:
                    self.nodes.pop(parts[2], None)
                    self.node_gone[parts[2]] = now
                else:
                    self.nodes.setdefault(parts[2], now)
            elif parts[:2] == ["derived", "instance"]:
                name = f"{parts[2]}/{parts[4]}"
                (self.wanted.add if value is not None else self.wanted.discard)(name)
            elif parts[:2] == ["derived", "placement"]:
                name = f"{parts[2]}/{parts[3]}"
                self.placed[name] = value["node"] if value else None
                if self.placed[name]:
                    self.placed_at[name] = now
                if value and value["node"] is None:
                    self.unplaced_reason = f"{name}: {value.get('reasons')}"
                self._check(name, now)
            elif parts[:2] == ["observed", "instance"]:
                name = f"{parts[2]}/{parts[3]}"
                if value is None:
                    self.observed.pop(name, None)
                else:
                    self.observed[name] = (value["node"], value["state"])
                self._check(name, now)
            self.cond.notify_all()

    def _check(self, name: str, now: float) -> None:
        node = self.placed.get(name)
        if node is not None and self.observed.get(name) == (node, "running"):
            self.running_since.setdefault(name, now)
        else:
            self.running_since.pop(name, None)

    def summary(self) -> str:
        states: dict[str, int] = {}
        for _, state in self.observed.values():
            states[state] = states.get(state, 0) + 1
        placed = sum(1 for n in self.wanted if self.placed.get(n))
        return (f"{len(self.nodes)} nodes, {len(self.wanted)} instances wanted, {placed} placed, "
                f"{sum(1 for n in self.wanted if n in self.running_since)} running where placed; "
                f"observed states {states}; last unplaced {self.unplaced_reason[:300]}")

    def all_running(self, expected: int) -> bool:
        return len(self.wanted) == expected and all(n in self.running_since for n in self.wanted)

    def wait(self, predicate, timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                if self.error is not None:
                    raise RuntimeError(f"watch failed: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{what}: not within {timeout:.0f} s ({self.summary()})")
                self.cond.wait(min(left, 0.5))
        return time.monotonic()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class Cluster:
    """Starts the server process, the agent processes and the admin client; `close()` ends all."""

    def __init__(self, root: Path, nodes: list[NodeSpec], store: str, ttl: float, kill: int,
                 tick: float, start_delay: float) -> None:
        from ccattler.engine.api.client import Client
        from ccattler.engine.clientconfig import Context
        from ccattler.engine.pki import NODE_LIFETIME, cert_pem, init_cluster, key_pem, new_key

        self.root, self.nodes, self.procs = root, nodes, []
        self._etcd = None
        if store == "etcd":
            from ccattler.engine.store.etcd_process import EtcdProcess

            self._etcd = EtcdProcess(str(root / "etcd")).start()
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
        self.view = ClusterView()
        start = self.client.json("Health")["revision"]
        threading.Thread(target=self.view.follow, args=(self.client.watch("", start),), daemon=True).start()
        # The victims (the first `kill` nodes) get a process of their own, so killing it kills them only.
        groups = [nodes[:kill]] if kill else []
        rest = nodes[kill:]
        per = math.ceil(len(rest) / max(1, math.ceil(len(rest) / NODES_PER_AGENT_PROCESS)))
        groups += [rest[i:i + per] for i in range(0, len(rest), per)]
        self.agents = []
        for g, group in enumerate(groups):
            nodes_file = root / f"nodes-{g}.json"
            nodes_file.write_text(json.dumps([asdict(spec) for spec in group]))
            proc = subprocess.Popen(
                [sys.executable, str(PARTS), "agents", "--server", self.listen, "--ca", str(files.ca_cert),
                 "--certs", str(certs), "--nodes-file", str(nodes_file), "--ttl", str(ttl),
                 "--tick", str(tick), "--start-delay", str(start_delay)],
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

    def server_stats(self) -> dict:
        self.server.stdin.write("stats\n")
        self.server.stdin.flush()
        return json.loads(self.server.stdout.readline())

    def server_command(self, command: str) -> None:
        self.server.stdin.write(command + "\n")
        self.server.stdin.flush()
        self.server.stdout.readline()

    def kill_victims(self) -> float:
        os.kill(self.agents[0].pid, signal.SIGKILL)
        return time.monotonic()

    def close(self) -> None:
        self.client.close()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    proc.stdin.write("quit\n")
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


def converge(cluster: Cluster, text: str, expected: int, timeout: float) -> dict:
    """Apply `text`; seconds until every wanted instance runs, and per instance (p50/p99)."""
    view = cluster.view
    t0 = time.monotonic()
    cluster.apply(text)
    applied = time.monotonic()
    done = view.wait(lambda: view.all_running(expected), timeout, f"{expected} instances running")
    with view.cond:
        per = [max(0.0, view.running_since[n] - t0) for n in view.wanted]
        placed = max(view.placed_at[n] for n in view.wanted) - t0
    return {"total": done - t0, "apply_call": applied - t0, "all_placed": placed,
            "p50": _percentile(per, 0.5), "p99": _percentile(per, 0.99)}


def fail_nodes(cluster: Cluster, ttl: float, timeout: float) -> dict:
    """SIGKILL the victims' agent process: lease expiry → detection; then all of their instances
    running on other nodes → re-placement."""
    view = cluster.view
    victims = set(cluster.victims)
    with view.cond:
        affected = {n for n, node in view.placed.items() if node in victims and n in view.wanted}
    t_kill = cluster.kill_victims()
    detected = view.wait(lambda: victims <= set(view.node_gone) and not victims & set(view.nodes),
                         ttl * 3 + timeout, "lost nodes' leases expire")
    with view.cond:
        detected = max(view.node_gone[v] for v in victims)

    def moved() -> bool:
        return all(view.placed.get(n) not in (None, *victims) and n in view.running_since for n in affected)

    recovered = view.wait(moved, timeout, f"{len(affected)} instances running elsewhere")
    return {"killed_nodes": len(victims), "affected": len(affected), "detection": detected - t_kill,
            "replacement": recovered - detected}


def idle(cluster: Cluster, seconds: float) -> dict:
    """Store revisions (= write transactions) per second and CPU of server and runner, nothing changing."""
    time.sleep(2.0)  # let the last reports and ticks finish
    rev0, s0 = cluster.client.json("Health")["revision"], cluster.server_stats()
    t0 = time.monotonic()
    time.sleep(seconds)
    rev1, s1 = cluster.client.json("Health")["revision"], cluster.server_stats()
    span = time.monotonic() - t0
    runner = (s1["runner_cpu"] - s0["runner_cpu"]) / span
    return {"writes_per_s": (rev1 - rev0) / span, "runner_cpu": runner,
            "server_cpu": (s1["cpu"] - s0["cpu"]) / span - runner}


def one_run(args: argparse.Namespace) -> dict:
    nodes = cluster_nodes(args.nodes)
    with tempfile.TemporaryDirectory(prefix="cca-cluster-bench-") as tmp:
        started = time.monotonic()
        cluster = Cluster(Path(tmp), nodes, args.store, args.ttl, args.kill, args.tick, args.start_delay)
        try:
            view = cluster.view
            view.wait(lambda: len(view.nodes) == len(nodes), args.timeout, f"{len(nodes)} nodes registered")
            figures: dict = {"nodes": len(nodes), "store": args.store,
                             "startup": time.monotonic() - started}
            if args.profile:
                cluster.server_command("profile-start")
            text, count = services_text(args.instances)
            figures["instances"] = count
            figures["converge"] = converge(cluster, text, count, args.timeout)
            if args.profile:
                cluster.server_command(f"profile-stop {args.profile}")
            text, scaled = services_text(args.instances, 1.5)
            figures["scale_up"] = {"instances": scaled, **converge(cluster, text, scaled, args.timeout)}
            figures["idle"] = idle(cluster, args.idle)
            if args.kill:
                figures["failure"] = fail_nodes(cluster, args.ttl, args.timeout)
            stats = cluster.server_stats()
            figures["server_peak_rss"] = stats["peak_rss"]
            figures["server_cpu_total"] = stats["cpu"]
            return figures
        finally:
            cluster.close()


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
    c, s, i = fig["converge"], fig["scale_up"], fig["idle"]

    def row(what: str, value: str, goal: str, ok: bool | None) -> str:
        mark = "" if ok is None else ("met" if ok else "MISSED")
        return f"  {what:<46} {value:>12}   target {goal:<12} {mark}"

    lines = [f"{fig['nodes']} nodes / {fig['instances']} instances, store {fig['store']}, "
             f"median of {runs} run(s); cluster start-up {fig['startup']:.1f} s",
             row("apply → all running (total)", f"{c['total']:.2f} s",
                 f"≤ {target:g} s" if target else "—", c["total"] <= target if target else None),
             row("  per instance p50 / p99", f"{c['p50']:.2f}/{c['p99']:.2f} s", "—", None),
             row("  the Apply call returned / all placed at",
                 f"{c['apply_call']:.2f}/{c['all_placed']:.2f} s", "—", None),
             row(f"scale-up +50% ({s['instances']} instances) → all running", f"{s['total']:.2f} s",
                 "—", None),
             row("  per instance p50 / p99", f"{s['p50']:.2f}/{s['p99']:.2f} s", "—", None),
             row("idle: store writes/s", f"{i['writes_per_s']:.1f}", f"≤ {IDLE_WRITES_TARGET:g}",
                 i["writes_per_s"] <= IDLE_WRITES_TARGET),
             row("idle: runner CPU", f"{i['runner_cpu'] * 100:.1f} %", "≤ 5 %",
                 i["runner_cpu"] <= IDLE_RUNNER_CPU_TARGET),
             row("idle: API server CPU (rest of the process)", f"{i['server_cpu'] * 100:.1f} %", "—", None),
             row("server + runner peak RSS", f"{fig['server_peak_rss'] / 2**20:.0f} MiB", "≤ 2048 MiB",
                 fig["server_peak_rss"] <= RSS_TARGET)]
    if "failure" in fig:
        f = fig["failure"]
        lines += [row(f"node loss ({f['killed_nodes']:g} killed, {f['affected']:g} instances): detection",
                      f"{f['detection']:.2f} s", f"≤ {ttl:g} s (TTL)", f["detection"] <= ttl),
                  row("  detection → all running elsewhere", f"{f['replacement']:.2f} s",
                      f"≤ {REPLACE_TARGET:g} s", f["replacement"] <= REPLACE_TARGET)]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=50)
    p.add_argument("--instances", type=int, default=1000)
    p.add_argument("--store", choices=("sqlite", "etcd"), default="sqlite")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--ttl", type=float, default=10.0, help="node lease TTL (seconds)")
    p.add_argument("--kill", type=int, default=1, help="nodes to kill (0: skip the failure part)")
    p.add_argument("--tick", type=float, default=1.0, help="agent loop tick (seconds)")
    p.add_argument("--start-delay", type=float, default=0.0, help="sim container start delay")
    p.add_argument("--idle", type=float, default=10.0, help="seconds of idle measurement")
    p.add_argument("--timeout", type=float, default=600.0, help="per phase (seconds)")
    p.add_argument("--profile", help="write a pyinstrument profile of the server during convergence here")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
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
