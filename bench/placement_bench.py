"""Placement benchmark: generated clusters, the placement controller's reconcile timed per scenario.

Run: `.venv/bin/python bench/placement_bench.py [SCENARIO…] [--repeat N]`. Scenarios (targets from
issue 4): full-1k (1,000 instances on 50 nodes, ≤ 1 s), full-10k (10,000 on 1,000 nodes, ≤ 10 s,
peak RSS ≤ 1 GB), tick-50 (50 new among 10,000 placed on 1,000 nodes, ≤ 0.5 s), pending-1k
(1,000 pending on 5,000 nodes, ≤ 2 s). Each scenario runs in its own process so its peak RSS is
its own; the figures are medians over `--repeat` runs.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time

from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.placement.builders import GI, MI, node, service
from ccattler.engine.placement.controller import PlacementController

ZONES = ("z1", "z2", "z3", "z4")


def cluster_nodes(count: int, rng: random.Random) -> list[tuple[str, dict]]:
    facts = []
    for i in range(count):
        labels = {"disk": "ssd" if rng.random() < 0.5 else "hdd", "rack": f"r{i % 20}"}
        restrict: list[str] = []
        if rng.random() < 0.05:
            labels["gpu"] = "true"
            restrict.append("gpu")
        size = rng.choice((16, 32, 48))
        facts.append(node(f"node-{i:05d}", size, size * 4 * GI, ZONES[i % len(ZONES)], labels, restrict))
    return facts


def services(total: int, rng: random.Random, prefix: str = "svc") -> list[tuple[str, dict]]:
    """Services of 5–40 replicas adding up to `total` instances, with mixed constraints."""
    facts, made, index = [], 0, 0
    while made < total:
        count = min(total - made, rng.randint(5, 40))
        kind = index % 6
        placement: dict = {}
        if kind == 0:
            placement["zone_spread"] = True
        elif kind == 1:
            placement["require"] = [{"key": "disk", "value": "ssd"}]
        elif kind == 2:
            placement["prefer"] = [{"key": "disk", "value": "ssd", "weight": 2}]
        elif kind == 3 and index > 0:
            placement["separate"] = [f"default/{prefix}-{index - 1}"]
        elif kind == 4 and index % 60 == 4:
            placement["require"] = [{"key": "gpu", "value": "true"}]
            placement["accept"] = ["gpu"]
        cpu = rng.choice((0.1, 0.25, 0.5, 1, 2))
        memory = rng.choice((128 * MI, 512 * MI, 1 * GI, 2 * GI))
        facts.append(service(f"{prefix}-{index}", count, cpu, memory, **placement))
        made += count
        index += 1
    return facts


def with_instances(values: dict) -> dict:
    snap = Snapshot(1, values)
    values = dict(values)
    values.update(InstanceController().reconcile(snap, 0.0).puts)
    return values


def timed_reconcile(
    values: dict, revision: int = 2, controller: PlacementController | None = None
) -> tuple[float, dict, object, float]:
    """One reconcile: wall seconds, puts, the plan, and CPU seconds of this process (all threads)."""
    controller = controller or PlacementController()
    cpu = time.process_time()
    start = time.perf_counter()
    changes = controller.reconcile(Snapshot(revision, values), 0.0)
    elapsed = time.perf_counter() - start
    return elapsed, dict(changes.puts), controller.last_plan, time.process_time() - cpu


def spread_skewed(values: dict) -> str:
    """'k/n': k of the n zone-spread services (no other constraint) end with zone skew > 1."""
    zone = {k.rsplit("/", 1)[1]: v["zone"] for k, v in values.items() if k.startswith("observed/node/")}
    spread = {f"{v['tenant']}/{v['name']}" for k, v in values.items()
              if k.startswith("desired/service/") and v["placement"]["zone_spread"]}
    counts = {s: dict.fromkeys(ZONES, 0) for s in spread}
    for key, doc in values.items():
        if key.startswith("derived/instance/") and doc["service"] in counts:
            where = values.get(f"derived/placement/{key.split('/')[2]}/{doc['name']}") or {}
            if where.get("node"):
                counts[doc["service"]][zone[where["node"]]] += 1
    bad = sum(1 for c in counts.values() if max(c.values()) - min(c.values()) > 1)
    return f"{bad}/{len(counts)}"


def separate_shared(values: dict) -> str:
    """'k/n': k of the n services with `separate` share a node with a service they are separated from."""
    nodes: dict[str, set[str]] = {}
    for key, doc in values.items():
        if key.startswith("derived/instance/"):
            where = values.get(f"derived/placement/{key.split('/')[2]}/{doc['name']}") or {}
            if where.get("node"):
                nodes.setdefault(doc["service"], set()).add(where["node"])
    apart = {f"{v['tenant']}/{v['name']}": v["placement"]["separate"] for k, v in values.items()
             if k.startswith("desired/service/") and v["placement"]["separate"]}
    bad = sum(1 for s, others in apart.items()
              if any(nodes.get(s, set()) & nodes.get(t, set()) for t in others))
    return f"{bad}/{len(apart)}"


def scenario(name: str) -> dict:
    rng = random.Random(7)
    controller = None
    if name == "full-1k":
        values = with_instances(dict(cluster_nodes(50, rng) + services(1000, rng)))
    elif name == "full-10k":
        values = with_instances(dict(cluster_nodes(1000, rng) + services(10_000, rng)))
    elif name == "pending-1k":
        values = with_instances(dict(cluster_nodes(5000, rng) + services(1000, rng)))
    elif name == "tick-50":  # the live controller object persists between ticks
        controller = PlacementController()
        values = with_instances(dict(cluster_nodes(1000, rng) + services(10_000, rng)))
        _, puts, _, _ = timed_reconcile(values, controller=controller)
        values.update(puts)
        values = with_instances({**values, **dict(services(50, random.Random(8), prefix="new"))})
    else:
        raise SystemExit(f"unknown scenario {name!r}")
    seconds, puts, result, cpu = timed_reconcile(values, 3, controller)
    placed = sum(1 for v in puts.values() if v["node"] is not None)
    skewed = spread_skewed({**values, **puts})
    shared = separate_shared({**values, **puts})
    return {
        "scenario": name, "seconds": round(seconds, 3), "cpu": round(cpu, 3), "placed": placed,
        "unplaced": sum(1 for v in puts.values() if v["node"] is None),
        "rounds": result.rounds, "proven": result.exhausted, "spread_skewed": skewed,
        "separate_shared": shared,
        "ground_s": round(result.ground_seconds, 3), "solve_s": round(result.solve_seconds, 3),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=["full-1k", "full-10k", "tick-50", "pending-1k"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(scenario(args.scenarios[0])))
        return
    for name in args.scenarios:
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True,
                                 check=True)
            runs.append(json.loads(out.stdout))
        median = statistics.median(r["seconds"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        last = runs[-1]
        print(f"{name:11} median {median:6.3f} s (cpu {cpu:.3f} s)  runs {[r['seconds'] for r in runs]}  "
              f"peak RSS {rss} MB  "
              f"placed {last['placed']} unplaced {last['unplaced']} rounds {last['rounds']} "
              f"ground {last['ground_s']} s solve {last['solve_s']} s proven {last['proven']} "
              f"spread skew>1 {last['spread_skewed']} separate sharing a node {last['separate_shared']}")


if __name__ == "__main__":
    main()
