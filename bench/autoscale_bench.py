"""Autoscale controller benchmark: the cost of one reconcile at N autoscaled services.

Each service has 5 instances with cgroup usage and a pushed requests_per_second total; every tick
moves the time by 15 s, changes the usage of a fraction of the instances (what the agents'
coalesced telemetry produces: 50-70 % of the request) and pushes a new rps total per service
(near the target). Reported: ms per reconcile and writes per tick (derived/scale documents that
changed). Pure Python, no store: the controller is a pure function of the snapshot. Run:

    .venv/bin/python bench/autoscale_bench.py [--services 1000] [--instances 5] [--ticks 20] [--churn 0.1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from types import MappingProxyType

from ccattler.dsl.compiler import compile_sources
from ccattler.dsl.sources import Source
from ccattler.engine.controllers.autoscale import AutoscaleController
from ccattler.engine.facts.snapshot import Snapshot

SERVICE = ('service s{n} {{ image "nginx" instances {instances} resources {{ cpu 500m memory 256Mi }} '
           'scale {{ horizontal {{ min 2 max 50 target cpu = 60 target requests_per_second = 100 '
           'event q{n} = 10 schedule {{ days weekdays start "08:00" end "18:00" minimum 3 }} }} }} }}\n')


def world(services: int, instances: int) -> dict:
    text = "".join(SERVICE.format(n=n, instances=instances) for n in range(services))
    facts = dict(compile_sources([Source("bench.cca", text)]))
    for n in range(services):
        for i in range(instances):
            facts[f"derived/instance/default/s{n}/s{n}-{i}"] = {"service": f"default/s{n}",
                                                                "name": f"s{n}-{i}"}
            facts[f"observed/instance/default/s{n}-{i}"] = {"state": "running", "ready": True,
                                                          "usage": {"cpu": 300, "memory": 100 << 20}}
    return facts


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--services", type=int, default=1000)
    p.add_argument("--instances", type=int, default=5)
    p.add_argument("--ticks", type=int, default=20)
    p.add_argument("--churn", type=float, default=0.1,
                   help="fraction of instances whose usage changes per tick")
    a = p.parse_args()
    rng = random.Random(1)
    facts = world(a.services, a.instances)
    controller = AutoscaleController()
    now = 1_767_603_600.0
    times, writes = [], []
    observed = [k for k in facts if k.startswith("observed/instance/")]
    for tick in range(a.ticks):
        now += 15
        for key in rng.sample(observed, int(len(observed) * a.churn)):
            facts[key] = {**facts[key], "usage": {"cpu": rng.randint(250, 350), "memory": 100 << 20}}
        for n in range(a.services):
            facts[f"observed/metric/default/s{n}/requests_per_second/cli"] = {
                "value": 100 * a.instances + (tick % 3), "time": now, "source": "cli"}
        snap = Snapshot(tick, MappingProxyType(dict(facts)))
        start = time.perf_counter()
        changes = controller.reconcile(snap, now)
        times.append((time.perf_counter() - start) * 1000)
        writes.append(len(changes.puts))
        facts.update(changes.puts)
    steady = times[1:]
    print(f"services {a.services} x {a.instances} instances, {a.ticks} ticks, churn {a.churn:.0%}")
    print(f"first reconcile {times[0]:.1f} ms (every document written: {writes[0]})")
    print(f"per tick: p50 {statistics.median(steady):.1f} ms, max {max(steady):.1f} ms, "
          f"writes p50 {statistics.median(writes[1:]):.0f}")


if __name__ == "__main__":
    main()
