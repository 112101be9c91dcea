"""Failover benchmark: a node's lease expires → its instances are placed elsewhere and addressed.

Compiles examples/sim-cluster.cca into a SQLite file store, registers its nodes as agents do
(`observed/node/<n>` bound to a lease of `--ttl` seconds, kept alive), runs the live runner with
the default controllers, then stops keeping one node alive and measures how long after the lease's
expiry (last keepalive + TTL) every instance that was on it has a new node and a new address.
Containers starting is the agent's part and not included. Run:

    .venv/bin/python bench/failover_bench.py [--ttl 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from ccattler.dsl.compiler import compile_sources
from ccattler.dsl.sources import Source
from ccattler.engine.controllers.registry import default_controllers
from ccattler.engine.runner import Runner
from ccattler.engine.store import Store, open_store

EXAMPLE = Path(__file__).parents[1] / "examples" / "sim-cluster.cca"


def register(store: Store, facts: dict, ttl: float) -> dict[str, int]:
    leases = {}
    for key, doc in facts.items():
        if key.startswith("desired/node/"):
            name = key.rsplit("/", 1)[1]
            leases[name] = store.lease_grant(ttl)
            store.put(f"observed/node/{name}", {
                "capacity": doc["capacity"], "labels": doc["labels"], "zone": doc["zone"],
                "architecture": "amd64", "restrictions": doc["restrictions"], "address": "192.0.2.1",
            }, lease=leases[name])
    return leases


def placements(store: Store) -> dict[str, str | None]:
    return {f.value["instance"]: f.value["node"] for f in store.range("derived/placement/")[0]}


def addresses(store: Store) -> dict[str, str]:
    return {f.value["instance"]: f.value["node"] for f in store.range("derived/network/ip/")[0]}


def one_round(ttl: float) -> float:
    facts = compile_sources([Source(EXAMPLE.name, EXAMPLE.read_text())])
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite://{tmp}/state.db") as store:
        store.txn((), sorted(facts.items()), ())
        leases = register(store, facts, ttl)
        alive = dict(leases)
        stop = threading.Event()
        last_keepalive = {name: time.monotonic() for name in leases}  # granted just now

        def heartbeat() -> None:
            while not stop.wait(ttl / 5):
                for name, lease in list(alive.items()):
                    store.lease_keepalive(lease)
                    last_keepalive[name] = time.monotonic()

        beats = threading.Thread(target=heartbeat, daemon=True)
        beats.start()
        runner = Runner(store, default_controllers(), leader_ttl=ttl)
        runner.start()
        try:
            while not (all(placements(store).values()) and addresses(store) == placements(store)
                       and len(placements(store)) == 9):
                time.sleep(0.05)
            before = placements(store)
            victim = next(n for n in sorted(set(before.values())) if n != "n4")
            moved = {inst for inst, node in before.items() if node == victim}
            del alive[victim]
            time.sleep(ttl / 5)  # let an in-flight heartbeat finish
            expiry = last_keepalive[victim] + ttl
            while True:
                now_placed, now_ips = placements(store), addresses(store)
                if all(now_placed.get(i) not in (None, victim) and now_ips.get(i) == now_placed[i]
                       for i in moved):
                    return time.monotonic() - expiry
                time.sleep(0.01)
        finally:
            runner.stop()
            stop.set()
            beats.join()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ttl", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    delays = [one_round(args.ttl) for _ in range(args.rounds)]
    print(f"lease TTL {args.ttl:.0f} s: instances of the lost node re-placed and addressed "
          f"{statistics.median(delays) * 1000:.0f} ms after the lease expired "
          f"(median of {args.rounds}; all: {', '.join(f'{d * 1000:.0f}' for d in delays)} ms)")


if __name__ == "__main__":
    main()
