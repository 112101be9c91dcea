"""Tight capacity: CCattler's plan against greedy schedulers written here, on the same cluster.

Run: `.venv/bin/python bench/tight_bench.py [--nodes 100] [--fill 0.90 0.94 0.98] [--seeds 1]`.
Each scenario: `--nodes` nodes of 16 cores / 64 GiB in 4 zones, services in random order mixing
large replicas (4–8 cores, 12–24 GiB) and small ones (0.25–1 core, 0.5–4 GiB), one in four with
`zone spread`, adding up to `fill` of the cluster's cpu (memory follows the mix). Compared in the
same run, on the same instances:

- first-fit: each replica in arrival order to the first node (by name) it fits on;
- least-allocated: each replica to the fitting node with the lowest used share afterwards (as
  kube-scheduler's default scoring), spread services preferring the zones holding fewest of
  their replicas (topology spread, maxSkew 1, ScheduleAnyway);
- ccattler: one `PlacementController.reconcile` (rules/placement.lp), default options;
- ccattler-narrow: the same with the earlier, narrower candidate lists (`NARROW`).

Figures: replicas placed (of all), zone skew (spread services with skew > 1 over the 4 zones),
nodes used, and stranded capacity: cpu cores left free on nodes where no unplaced replica fits
(all placed: where the largest request no longer fits), i.e. capacity nothing waiting can use.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter, defaultdict

from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.placement.builders import GI, node, service
from ccattler.engine.placement.candidates import CandidatePolicy
from ccattler.engine.placement.controller import PlacementController
from ccattler.engine.placement.run import PlanOptions

ZONES = ("z1", "z2", "z3", "z4")
CORES, MEMORY = 16, 64 * GI
#: ccattler-narrow: the earlier default candidate lists, 16 nodes per unit holding 2 × its
#: replicas (the default is now 40 and 4 ×).
NARROW = PlanOptions(candidates=CandidatePolicy(min_count=16, headroom=2))


def scenario(nodes: int, fill: float, seed: int) -> dict:
    rng = random.Random(seed)
    values = dict(node(f"n{i:04d}", CORES, MEMORY, ZONES[i % 4]) for i in range(nodes))
    budget, used, index = fill * nodes * CORES * 1000, 0, 0
    while True:
        large = rng.random() < 0.35
        cpu = rng.choice((4, 6, 8)) if large else rng.choice((0.25, 0.5, 1))
        mem = rng.choice((12, 16, 24)) * GI if large else rng.choice((0.5, 1, 2, 4)) * GI
        count = rng.randint(2, 8) if large else rng.randint(4, 24)
        count = min(count, int((budget - used) // (cpu * 1000)))
        if count <= 0:
            break
        key, doc = service(f"s{index:03d}", count, cpu, int(mem), zone_spread=index % 4 == 0)
        values[key] = doc
        used += count * cpu * 1000
        index += 1
    values.update(InstanceController().reconcile(Snapshot(1, values), 0.0).puts)
    return values


def requests(values: dict) -> list[tuple[str, str, int, int, bool]]:
    """(instance, service, cpu millicores, memory bytes, spread) in arrival order."""
    services = {f"{d['tenant']}/{d['name']}": d for k, d in values.items()
                if k.startswith("desired/service/")}
    out = []
    for key in sorted(services):
        doc = services[key]
        insts = sorted(k for k, d in values.items()
                       if k.startswith("derived/instance/") and d["service"] == key)
        out += [(i, key, doc["resources"]["cpu"], doc["resources"]["memory"],
                 doc["placement"]["zone_spread"]) for i in insts]
    return out


def nodes_of(values: dict) -> dict[str, tuple[str, int, int]]:
    return {k.rsplit("/", 1)[1]: (d["zone"], d["capacity"]["cpu"], d["capacity"]["memory"])
            for k, d in values.items() if k.startswith("observed/node/")}


def greedy(values: dict, least_allocated: bool) -> dict[str, str]:
    nodes = nodes_of(values)
    free = {n: [c, m] for n, (_, c, m) in nodes.items()}
    per_zone: dict[str, Counter] = defaultdict(Counter)
    placed = {}
    for inst, svc, cpu, mem, spread in requests(values):
        fits = [n for n in sorted(nodes) if free[n][0] >= cpu and free[n][1] >= mem]
        if not fits:
            continue
        if spread:
            low = min(per_zone[svc][z] for z in ZONES)
            fits = [n for n in fits if per_zone[svc][nodes[n][0]] == low] or fits
        if least_allocated:  # the fitting node with the lowest used share after this replica
            choice = min(fits, key=lambda n: (max(1 - (free[n][0] - cpu) / nodes[n][1],
                                                  1 - (free[n][1] - mem) / nodes[n][2]), n))  # noqa: B023
        else:
            choice = fits[0]
        free[choice][0] -= cpu
        free[choice][1] -= mem
        per_zone[svc][nodes[choice][0]] += 1
        placed[inst] = choice
    return placed


def ccattler(values: dict, options: PlanOptions | None = None) -> tuple[dict[str, str], float]:
    start = time.perf_counter()
    puts = PlacementController(options).reconcile(Snapshot(2, values), 0.0).puts
    seconds = time.perf_counter() - start
    by_name = {f"derived/placement/{k.split('/')[2]}/{d['name']}": k
               for k, d in values.items() if k.startswith("derived/instance/")}
    return {by_name[k]: d["node"] for k, d in puts.items() if d["node"] is not None}, seconds


def figures(values: dict, placed: dict[str, str]) -> dict:
    nodes = nodes_of(values)
    reqs = requests(values)
    free = {n: [c, m] for n, (_, c, m) in nodes.items()}
    zones: dict[str, Counter] = defaultdict(Counter)
    spread = set()
    for inst, svc, cpu, mem, is_spread in reqs:
        if is_spread:
            spread.add(svc)
        if inst in placed:
            free[placed[inst]][0] -= cpu
            free[placed[inst]][1] -= mem
            zones[svc][nodes[placed[inst]][0]] += 1
    waiting = ([(c, m) for i, _, c, m, _ in reqs if i not in placed]
               or [max((c, m) for _, _, c, m, _ in reqs)])
    stranded = sum(f[0] for f in free.values() if not any(f[0] >= c and f[1] >= m for c, m in waiting))
    skewed = sum(1 for s in spread if max(zones[s][z] for z in ZONES) - min(zones[s][z] for z in ZONES) > 1)
    return {"placed": len(placed), "of": len(reqs), "skewed": f"{skewed}/{len(spread)}",
            "nodes_used": len(set(placed.values())), "stranded_cores": round(stranded / 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--fill", type=float, nargs="*", default=[0.90, 0.94, 0.98])
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    print(f"{'fill':>5} {'seed':>4} {'scheduler':16} {'placed':>11} {'skew>1':>7} {'nodes':>5} "
          f"{'stranded':>9} {'seconds':>7}")
    for fill in args.fill:
        for seed in range(1, args.seeds + 1):
            values = scenario(args.nodes, fill, seed)
            runs = [("first-fit", greedy(values, False), 0.0), ("least-allocated", greedy(values, True), 0.0),
                    ("ccattler", *ccattler(values)), ("ccattler-narrow", *ccattler(values, NARROW))]
            for name, placed, seconds in runs:
                f = figures(values, placed)
                print(f"{fill:5.2f} {seed:4d} {name:16} {f['placed']:>5}/{f['of']:<5} {f['skewed']:>7} "
                      f"{f['nodes_used']:>5} {f['stranded_cores']:>9} {seconds:7.2f}")


if __name__ == "__main__":
    main()
