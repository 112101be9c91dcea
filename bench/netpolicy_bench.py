"""Network-policy benchmark: the logic at N services × R rules each, the controller's incremental
paths, and nft kernel time per grant / relabel in a scratch network namespace.

    .venv/bin/python bench/netpolicy_bench.py [--services 10000] [--rules 10] [--nodes 100] [--no-nft]
    .venv/bin/python bench/netpolicy_bench.py --nft-only [--rounds 50]   (the kernel figures alone)
    .venv/bin/python bench/netpolicy_bench.py --growth 100,1000,10000   (kernel state vs instances)

Services are `t<k>/s<i>` in 100 tenants; service i's rules allow services i+1 … i+R (mod N) on
port 5432/tcp (one in ten from the tenant wildcard instead), so every service is default-deny
and has R allowed tuples: state is rules × identities, never instance pairs. One instance per
service, on node i mod `--nodes`.

Prints: full solve (ground+solve) and decode time; the controller's first pass; a rule change and
a new service (the controller solves only the destinations they touch); an instance move (no
solve, only documents naming it rewritten);
tuples per node; nft times per grant / relabel against 1,000 identities and one destination with
10,000 tuples, in-process and with one `nft` process per transaction (needs root + nft).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import time
from types import MappingProxyType

from ccattler.agent.dataplane import libnft
from ccattler.agent.dataplane.base import PolicyIngress
from ccattler.agent.dataplane.policy_nft import PolicyError, PolicyTables, run_command
from ccattler.agent.net import netns
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.netpolicy.controller import NetpolicyController
from ccattler.engine.netpolicy.evaluate import evaluate


def world(services: int, rules: int, nodes: int) -> dict:
    values: dict = {}
    names = [f"t{i % 100}/s{i}" for i in range(services)]
    for i, name in enumerate(names):
        tenant = name.split("/")[0]
        values[f"desired/service/{name}"] = {"expose": [{"port": 5432, "protocol": "tcp"}]}
        for k in range(1, rules + 1):
            src = names[(i + k) % services] if k != rules else f"t{(i + 1) % 100}/*"
            values[f"desired/network/{tenant}/r{i}x{k}"] = {"action": "allow", "from": src, "to": name,
                                                         "port": 5432, "protocol": "tcp"}
        node, ip = f"n{i % nodes}", f"10.{(i // 250) % 250}.{i % 250}.{2 + i // 62500}"
        values[f"derived/network/ip/{name.split('/')[0]}/{name.split('/')[1]}-0"] = {
            "instance": f"{name.split('/')[1]}-0", "service": name, "node": node, "ip": ip}
    return values


def run(controller, values, revision):
    start = time.perf_counter()
    changes = controller.reconcile(Snapshot(revision, MappingProxyType(values)), 0.0)
    elapsed = time.perf_counter() - start
    values = dict(values)
    values.update(changes.puts)
    for key in changes.deletes:
        values.pop(key)
    return values, changes, elapsed


def nft_times(rounds: int = 50, processes: bool = False) -> dict:
    ns = f"npbench{secrets.token_hex(3)}"
    netns.create(ns)
    try:
        return netns.run_in(ns, lambda: _nft_rounds(rounds, processes))
    finally:
        netns.remove(ns)


def _nft_rounds(rounds: int, processes: bool) -> dict:
    """On a thread inside the scratch namespace: libnftables in-process, as the agent runs it (or
    one `nft -f -` process per transaction with `processes`). `txn` is the nft transaction alone;
    `apply` adds the revocation check (a `conntrack -L` per changed local address)."""
    spent: list[float] = []
    default = run_command if processes else libnft.runner(run_command, PolicyError)

    def timed(argv, stdin=None):
        start = time.perf_counter()
        try:
            return default(argv, stdin)
        finally:
            if list(argv) == ["nft", "-f", "-"]:
                spent.append(time.perf_counter() - start)

    tables = PolicyTables("br0", "10.0.0.1", run=timed)
    identities = {f"t/s{i}": frozenset({f"10.1.{i // 250}.{i % 250 + 2}"}) for i in range(1000)}
    allowed = frozenset((f"t/s{(i + k) % 1000}", 5432 + k, "tcp") for i in range(1000) for k in range(10))
    policies = {"t/db": PolicyIngress("t/db", frozenset({"10.9.0.2"}), allowed)}
    start = time.perf_counter()
    tables.apply(identities | {"t/db": frozenset({"10.9.0.2"})}, policies)
    first = time.perf_counter() - start
    grants, relabels, grant_txn, relabel_txn = [], [], [], []
    for r in range(rounds):
        ingress = policies["t/db"]
        grant = ingress.allowed | {(f"t/s{r}", 8000 + r, "tcp")}
        policies = {"t/db": PolicyIngress("t/db", ingress.local_ips, grant)}
        spent.clear()
        start = time.perf_counter()
        tables.apply(tables.state.identities, policies)
        grants.append(time.perf_counter() - start)
        grant_txn.append(sum(spent))
        moved = dict(tables.state.identities)
        moved[f"t/s{r}"] = frozenset({f"10.2.0.{r + 2}"})
        spent.clear()
        start = time.perf_counter()
        tables.apply(moved, policies)
        relabels.append(time.perf_counter() - start)
        relabel_txn.append(sum(spent))
    assert tables.replaced == 1, "every change after the first must be a delta"
    tables.teardown()

    def ms(values: list[float], q: float) -> float:
        at = statistics.median(values) if q == 0.5 else sorted(values)[int(q * len(values))]
        return round(1000 * at, 2)

    return {"runner": "nft process" if processes else "libnftables in-process",
            "first_10k_tuples_s": round(first, 3),
            "grant_txn_p50_ms": ms(grant_txn, 0.5), "grant_txn_p99_ms": ms(grant_txn, 0.99),
            "relabel_txn_p50_ms": ms(relabel_txn, 0.5), "relabel_txn_p99_ms": ms(relabel_txn, 0.99),
            "grant_apply_p50_ms": ms(grants, 0.5), "grant_apply_p99_ms": ms(grants, 0.99),
            "relabel_apply_p50_ms": ms(relabels, 0.5), "relabel_apply_p99_ms": ms(relabels, 0.99)}


def growth(sizes: list[int], identities: int = 100, rules: int = 10) -> list[dict]:
    """Kernel state against instances: `identities` guarded identities, each allowing `rules`
    others (port 5432/tcp), with N instances in all spread over them, every one local (the worst
    case for one node). Counts the table's rules and each set's elements (`nft -j list table`)."""
    ns = f"npgrow{secrets.token_hex(3)}"
    netns.create(ns)
    try:
        return netns.run_in(ns, lambda: [_growth_one(n, identities, rules) for n in sizes])
    finally:
        netns.remove(ns)


def _growth_one(instances: int, identities: int, rules: int) -> dict:
    import json
    from collections import Counter

    tables = PolicyTables("br0", "10.0.0.1", run=libnft.runner(run_command, PolicyError))
    per = instances // identities
    names = [f"t/s{i}" for i in range(identities)]
    addrs = {n: frozenset(f"10.{100 + i}.{k // 250}.{k % 250 + 2}" for k in range(per))
             for i, n in enumerate(names)}
    policies = {n: PolicyIngress(n, addrs[n], frozenset((names[(i + k) % identities], 5432, "tcp")
                                                        for k in range(1, rules + 1)))
                for i, n in enumerate(names)}
    start = time.perf_counter()
    tables.apply(addrs, policies)
    load = time.perf_counter() - start
    listing = json.loads(run_command(["nft", "-j", "list", "table", "inet", tables.table]))["nftables"]
    tables.teardown()
    elements: Counter = Counter()
    rules_in_table = 0
    for item in listing:
        if "rule" in item:
            rules_in_table += 1
        for kind in ("set", "map"):
            if kind in item:
                elements[item[kind]["name"].split("_")[0]] += len(item[kind].get("elem", []))
    return {"instances": per * identities, "identities": identities, "allowed_tuples": identities * rules,
            "instance_pairs": (per * identities) ** 2, "rules": rules_in_table,
            "elements": sum(elements.values()), "elements_by_set": dict(sorted(elements.items())),
            "load_s": round(load, 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--rules", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--no-nft", action="store_true")
    parser.add_argument("--nft-only", action="store_true", help="only the nft transaction times")
    parser.add_argument("--rounds", type=int, default=50, help="grants and relabels timed (nft)")
    parser.add_argument("--growth",
                        help="only the kernel state at these instance counts (e.g. 100,1000,10000)")
    args = parser.parse_args()
    if args.growth:
        for row in growth([int(n) for n in args.growth.split(",")]):
            print("growth:", row)
        return
    if args.nft_only:
        nft(args.rounds)
        return
    values = world(args.services, args.rules, args.nodes)
    start = time.perf_counter()
    policy = evaluate(values)
    solve = time.perf_counter() - start
    tuples = sum(len(t) for t in policy.allowed.values())
    print(f"{args.services} services x {args.rules} rules: solve+decode {solve:.2f} s, "
          f"{len(policy.guarded)} guarded, {tuples} allowed tuples")
    controller = NetpolicyController()
    values, changes, first = run(controller, values, 1)
    sizes = [len(doc["policies"]) for key, doc in values.items() if key.startswith("derived/firewall/")]
    print(f"controller first pass {first:.2f} s, {len(changes.puts)} documents, "
          f"guarded identities per node document max {max(sizes)}")
    values["desired/network/t0/extra"] = {"action": "allow", "from": "t5/s5", "to": "t0/s0", "port": 80,
                                          "protocol": "tcp"}
    values, changes, rule = run(controller, values, 2)
    print(f"rule added: {rule:.2f} s (solves {controller.solves}), {len(changes.puts)} documents rewritten")
    values["desired/service/t3/new"] = {"expose": [{"port": 5432, "protocol": "tcp"}]}
    values, changes, added = run(controller, values, 3)
    print(f"service added (a source of t3/* rules): {1000 * added:.1f} ms (solves {controller.solves}), "
          f"{len(changes.puts)} documents rewritten")
    moved = "derived/network/ip/t7/s7-0"
    values[moved] = dict(values[moved], node="n99", ip="10.250.0.9")
    values, changes, move = run(controller, values, 4)
    print(f"instance moved: {1000 * move:.1f} ms (solves {controller.solves}), "
          f"{len(changes.puts) + len(changes.deletes)} documents rewritten")
    if not args.no_nft:
        nft(args.rounds)


def nft(rounds: int) -> None:
    if os.geteuid() != 0 or not shutil.which("nft"):
        print("nft: skipped (needs root and nft)")
        return
    print("nft:", nft_times(rounds))
    print("nft:", nft_times(rounds, processes=True))


if __name__ == "__main__":
    main()
