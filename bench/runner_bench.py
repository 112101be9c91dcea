"""Runner benchmark: the Python controllers and the runner at 1,000 nodes × 10,000 instances.

Measures, on a durable SQLite file store (or a local etcd): settle from empty and the no-op re-settle; each
controller's no-op reconcile; a snapshot from one `range` per prefix against one from the
watch-fed cache; and live-runner tick latency (scale one service by 50 → its instances and
addresses committed). Run:

    .venv/bin/python bench/runner_bench.py [--store sqlite|etcd] [--nodes 1000] [--services 1000] [--rounds 5]

Figures are medians over `--rounds` where repeated; the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator

from ccattler.engine.controllers.failure import FailureController
from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.controllers.network import NetworkController
from ccattler.engine.runner import FactCache, Runner, read_snapshot, settle
from ccattler.engine.store import Store, open_store
from ccattler.engine.store.etcd_process import EtcdProcess


@contextlib.contextmanager
def opened(kind: str) -> Iterator[Store]:
    """A durable SQLite file store, or a fresh local etcd (CCattler's raised txn limits)."""
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "sqlite":
            with open_store(f"sqlite://{tmp}/state.db") as store:
                yield store
        else:
            with EtcdProcess() as etcd, open_store(etcd.url) as store:
                yield store


def node_doc(i: int) -> dict:
    return {"capacity": {"cpu": 16000, "memory": 64 << 30}, "labels": {"disk": "ssd" if i % 2 else "hdd"},
            "zone": f"z{i % 3}", "architecture": "amd64", "restrictions": [], "address": f"192.0.2.{i % 250}"}


def service_doc(i: int, replicas: int) -> dict:
    return {"kind": "service", "tenant": "default", "name": f"svc{i}", "image": f"busybox:{i % 7}",
            "instances": replicas, "stateful": i % 10 == 0, "command": None, "env": {"N": str(i)},
            "config": {"env": {}, "files": []}, "resources": {"cpu": 100, "memory": 64 << 20},
            "secrets": [], "connections": [], "volumes": [], "init": []}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median(fn, rounds: int) -> float:
    return statistics.median(timed(fn) for _ in range(rounds))


def cpu_median(fn, rounds: int) -> float:
    """Median CPU time of this process (all threads): steadier than wall time on a shared machine."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def _args(controller) -> tuple:
    """Constructor arguments to build a fresh copy of `controller` (no memo)."""
    if isinstance(controller, NetworkController):
        return (str(controller.cluster), controller.node_prefix)
    return ()


def load(store: Store, nodes: int, services: int, replicas: int) -> None:
    puts = [(f"observed/node/n{i:04d}", node_doc(i)) for i in range(nodes)]
    puts += [(f"desired/service/default/svc{i}", service_doc(i, replicas)) for i in range(services)]
    for start in range(0, len(puts), 1000):
        store.txn((), puts[start:start + 1000], ())


def place_all(store: Store, nodes: int) -> None:
    """A stand-in for the placement controller: round-robin every instance onto the nodes."""
    facts, _ = store.range("derived/instance/")
    puts = []
    for i, fact in enumerate(facts):
        tenant = fact.key.split("/")[2]
        puts.append((f"derived/placement/{tenant}/{fact.value['name']}",
                     {"service": fact.value["service"], "instance": fact.value["name"],
                      "node": f"n{i % nodes:04d}", "revision": 1, "score": 0}))
    for start in range(0, len(puts), 1000):
        store.txn((), puts[start:start + 1000], ())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--store", choices=["sqlite", "etcd"], default="sqlite")
    args = parser.parse_args()
    total = args.services * args.replicas
    print(f"{args.nodes} nodes, {args.services} services × {args.replicas} = {total} instances "
          f"on {args.store}")

    with opened(args.store) as store:
        load(store, args.nodes, args.services, args.replicas)
        instance = InstanceController()
        failure = FailureController()
        network = NetworkController("10.0.0.0/8", 24, "172.31.0.0/16")

        print(f"settle instance controller from empty: {timed(lambda: settle(store, [instance], 0.0)):.2f} s")
        print(f"re-settle (no-op round): {median(lambda: settle(store, [instance], 0.0), args.rounds):.3f} s")
        place_all(store, args.nodes)
        first = timed(lambda: settle(store, [failure, network], 0.0))
        print(f"settle failure + network (1000 subnets, {total} addresses): {first:.2f} s")
        print(f"re-settle failure + network (no-op): "
              f"{median(lambda: settle(store, [failure, network], 0.0), args.rounds):.3f} s")

        for controller in (instance, failure, network):
            snap = read_snapshot(store, controller.reads)
            ranged = median(lambda c=controller: read_snapshot(store, c.reads), args.rounds)
            fresh = cpu_median(lambda c=controller, s=snap: type(c)(*_args(c)).reconcile(s, 0.0), args.rounds)
            warm = cpu_median(lambda c=controller, s=snap: c.reconcile(s, 0.0), args.rounds)
            print(f"{controller.name:9s} {len(snap.values):6d} keys: snapshot by range "
                  f"{ranged * 1000:7.1f} ms, no-op reconcile CPU {fresh * 1000:7.1f} ms "
                  f"(warm controller: {warm * 1000:.1f} ms)")

        prefixes = {p for c in (instance, failure, network) for p in c.reads}
        cache = FactCache(store, prefixes, lambda key, revision, *change: None)
        cache.start()
        for controller in (instance, network):
            cached = median(lambda c=controller: cache.snapshot(c.reads), args.rounds)
            print(f"{controller.name:9s} snapshot from the watch-fed cache: {cached * 1000:7.1f} ms")
        cache.stop()

        runner = Runner(store, [instance, failure, network], debounce=0.02)
        runner.start()
        runner.wait_idle(120)
        latencies = []
        for r in range(args.rounds):
            target = args.replicas + 50 * (r + 1)
            doc = service_doc(1, target)
            start = time.perf_counter()
            store.put("desired/service/default/svc1", doc)
            while len(store.range("derived/instance/default/svc1/")[0]) < target:
                time.sleep(0.002)
            latencies.append(time.perf_counter() - start)
        runner.stop()
        stats = runner.stats["instance"]
        print(f"instance controller in the live runner: {stats.reconciles} reconciles, "
              f"mean {stats.reconcile_seconds_sum / max(1, stats.reconciles) * 1000:.0f} ms")
        tick = statistics.median(latencies) * 1000
        print(f"live tick: +50 instances of one service committed in {tick:.0f} ms "
              f"(median of {args.rounds}, includes the 20 ms debounce)")


if __name__ == "__main__":
    main()
