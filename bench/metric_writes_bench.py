"""Store writes/s of the autoscaler's samples at 1,000 nodes / 10,000 instances (issue 18 part 2:
"at 10,000 instances the metric writes stay within ≤ 200 store writes/s idle at 1,000 nodes").

Every node runs the agent's own coalescing code over a simulated clock: `agent.telemetry.Telemetry`
(each instance's `usage`: a write when cpu, memory or their window P95s move meaningfully, or every
`refresh`) and, for the gated services, `agent.service_metrics.Recent` + `ServiceMetrics` as
`NodeCore._measured_load` does (requests/s per node: a write on a 10 % move or every 30 s, zeros
included for 10 minutes after the node's last request, so the service can scale down; nothing
after that). A write is a document whose published value changed since the node's last report,
which is what the agent's reporter sends. Instances are idle: 2–8 m of cpu with ±1 m of noise,
20–60 MiB with ±64 KiB. Gates carry `--rps` requests/s on every node for the first 2 minutes,
then none. Phases (writes/s each): `load` (minutes 1–2), `zeros` (the 10 minutes after the load
stopped), `idle` (the last 8 minutes). Start-up (every document written once) is minute 0.

    .venv/bin/python -u bench/metric_writes_bench.py [--nodes 1000] [--instances 10000]
        [--gated 5] [--rps 20] [--refresh 300]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time

from ccattler.agent.runtime.base import Usage
from ccattler.agent.service_metrics import Recent, ServiceMetrics
from ccattler.agent.telemetry import Telemetry

TARGET = 200.0


class IdleRuntime:
    """Cumulative cpu and current memory of idle instances, with noise, on a simulated clock."""

    def __init__(self, names: list[str], clock, rng: random.Random) -> None:
        self.clock, self.rng = clock, rng
        self.rate = {n: rng.uniform(0.002, 0.008) for n in names}  # cpu-seconds per second
        self.memory = {n: rng.randint(20, 60) << 20 for n in names}
        self.spent = dict.fromkeys(names, 0.0)
        self.last = dict.fromkeys(names, 0.0)

    def stats(self, name: str) -> Usage:
        now = self.clock()
        rate = max(0.0, self.rate[name] + self.rng.uniform(-0.001, 0.001))
        self.spent[name] += rate * (now - self.last[name])
        self.last[name] = now
        return Usage(self.spent[name], self.memory[name] + self.rng.randint(-65536, 65536), 3)


PHASES = (("load", 60, 120), ("zeros", 120, 720), ("idle", 720, 1200))


def run(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    rng = random.Random(7)
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    per_node = [args.instances // args.nodes + (n < args.instances % args.nodes) for n in range(args.nodes)]
    nodes = []
    for n, count in enumerate(per_node):
        names = [f"t/svc{(n * 7 + i) % 1000}-{n}-{i}" for i in range(count)]
        telemetry = Telemetry(IdleRuntime(names, clock, rng), interval=10, refresh=args.refresh,
                              clock=clock, wall=lambda: 1.8e9 + now[0])
        telemetry._next = rng.uniform(0, 10)  # nodes started at different moments
        nodes.append((names, telemetry, Recent(), ServiceMetrics(f"n{n}"), {}, {}))
    gated = [f"t/gated{g}" for g in range(args.gated)]
    writes = {phase: {"usage": 0, "gate requests/s": 0} for phase, _, _ in PHASES}
    next_load = [rng.uniform(0, 10) for _ in nodes]
    while now[0] < PHASES[-1][2]:
        now[0] += 1.0
        phase = next((p for p, start, end in PHASES if start < now[0] <= end), None)
        counts = writes.get(phase, {"usage": 0, "gate requests/s": 0})
        rps = args.rps * rng.uniform(0.9, 1.1) if now[0] <= 120 else 0.0
        for k, (names, telemetry, recent, metrics, last_usage, last_metric) in enumerate(nodes):
            telemetry.sample(names)
            for name in names:
                doc = telemetry.usage(name)
                if doc != last_usage.get(name):
                    last_usage[name] = doc
                    counts["usage"] += 1
            if now[0] >= next_load[k]:  # the agent's --metric-interval (10 s)
                next_load[k] = now[0] + 10
                rates = recent.keep(dict.fromkeys(gated, rps), now[0])
                metrics.update({(svc, "requests_per_second"): (rate, "gate") for svc, rate in rates.items()},
                               now[0])
                for key, doc in metrics.documents().items():
                    if doc != last_metric.get(key):
                        last_metric[key] = doc
                        counts["gate requests/s"] += 1
    return {phase: {kind: count / (end - start) for kind, count in writes[phase].items()}
            for phase, start, end in PHASES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--instances", type=int, default=10000)
    parser.add_argument("--gated", type=int, default=5,
                        help="services behind a gate (each node reports them)")
    parser.add_argument("--rps", type=float, default=20.0, help="each node's gate load while loaded")
    parser.add_argument("--refresh", type=float, default=Telemetry.__init__.__kwdefaults__["refresh"],
                        help="telemetry's rewrite period of a steady usage (the agent's default)")
    args = parser.parse_args()
    started = time.perf_counter()
    phases = run(args)
    print(f"# {platform.node()} {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {args.nodes} nodes, {args.instances} "
          f"instances, {args.gated} gated services, usage refresh {args.refresh:g} s; simulated "
          f"20 min in {time.perf_counter() - started:.1f} s")
    for phase, rates in phases.items():
        total = sum(rates.values())
        parts = ", ".join(f"{kind} {rate:.1f}" for kind, rate in rates.items())
        met = "met" if total <= TARGET else "NOT met"
        verdict = f"   target ≤ {TARGET:g} — {met}" if phase == "idle" else ""
        print(f"{phase:<6} {total:7.1f} writes/s ({parts}){verdict}")


if __name__ == "__main__":
    main()
