"""Frozen documents benchmark: what making snapshot documents read-only costs per document.

Compares, per document (a full service document as docs/facts.md shows it, and an observed
instance), in the same run: `json.loads` alone (the decode the store does anyway), plus
`freeze()` (FrozenDict/FrozenList, engine/facts/frozen.py: what the runner's cache does), and the
alternative of recursive `types.MappingProxyType` + tuples (rejected: `isinstance(x, dict)`,
`json.dumps` and `== [..]` change behaviour). Then, on a SQLite file store holding `--docs`
services and as many observed instances, `read_snapshot` (range + freeze, what `settle` uses)
against the bare `store.range` of the same prefixes (decode only) in the same run, and with the
memo `settle` keeps (values already frozen at the same mod revision reused). Run:

    .venv/bin/python bench/frozen_bench.py [--rounds 7] [--docs 10000]

Figures are medians of `--rounds` runs (µs per document); the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from types import MappingProxyType

from ccattler.engine.facts.frozen import freeze
from ccattler.engine.runner import read_snapshot
from ccattler.engine.store import open_store

SERVICE = {
    "kind": "service", "tenant": "payments", "name": "checkout", "source": "shop.cca",
    "image": "registry.local:5000/shop/checkout:2.0", "instances": 4, "command": None,
    "expose": [{"port": 443, "protocol": "tcp", "external": False}],
    "resources": {"cpu": 500, "memory": 268435456}, "env": {"LOG_LEVEL": "info"},
    "config": {"env": {"FEATURE_X": "on"},
               "files": [{"path": "/etc/app/app.conf", "content": "listen 8080\n", "from": None}]},
    "secrets": [{"name": "payments/database.password", "mount": "/run/secrets/database.password"}],
    "connections": ["payments/maindb"], "volumes": [{"name": "payments/data", "path": "/var/lib/app"}],
    "stateful": False, "owner": None, "tags": {"team": "payments"},
    "init": [{"exec": "migrate --up", "timeout": 60000, "retry": 3}],
    "probes": {"liveness": {"type": "http", "path": "/healthz", "command": None, "port": 8080,
                            "every": 10000, "timeout": 2000, "failure_threshold": 3, "success_threshold": 1,
                            "initial_delay": 0},
               "startup": None, "readiness": None},
    "placement": {"require": [{"key": "disk", "value": "ssd"}],
                  "prefer": [{"key": "region", "value": "us-east", "weight": 1}], "accept": ["gpu"],
                  "zone": None, "zone_spread": True, "architecture": None, "colocate": ["default/redis"],
                  "separate": ["payments/database"]},
    "update": {"max_unavailable": 1, "max_extra": 1, "deadline": 600000},
    "disruption": {"min_available": 3, "max_unavailable": None}, "scale": None, "group": None,
}

OBSERVED = {
    "node": "n17", "state": "running", "ip": "10.88.17.5", "restarts": 0, "reason": None, "health": "ok",
    "ready": True, "usage": {"cpu": 120, "memory": 52428800, "pids": 4},
    "volumes": [{"name": "payments/data", "path": "/var/lib/app", "size": None, "used": 4096,
                 "enforced": True}],
    "identity": {"spiffe_id": "spiffe://ccattler/payments/checkout", "serial": "0af3", "expires": 1796000000,
                 "rotates": 1795990000},
}


def proxy(value):
    """The rejected alternative: read-only mappings over dicts, tuples for lists."""
    if isinstance(value, dict):
        return MappingProxyType({k: proxy(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(proxy(v) for v in value)
    return value


def per_doc(fn, blobs: list[bytes], rounds: int) -> float:
    """Median µs per document of `fn` over every blob."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for blob in blobs:
            fn(blob)
        times.append((time.perf_counter() - start) / len(blobs) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--docs", type=int, default=10_000)
    args = parser.parse_args()
    for name, doc in (("service", SERVICE), ("observed instance", OBSERVED)):
        blobs = [json.dumps({**doc, "name": f"s{i}"}).encode() for i in range(args.docs)]
        decode = per_doc(json.loads, blobs, args.rounds)
        frozen = per_doc(lambda b: freeze(json.loads(b)), blobs, args.rounds)
        proxied = per_doc(lambda b: proxy(json.loads(b)), blobs, args.rounds)
        decoded = [json.loads(b) for b in blobs]
        start = time.perf_counter()
        for value in decoded:
            freeze(value)
        only = (time.perf_counter() - start) / len(decoded) * 1e6
        print(f"{name:18} ({len(blobs[0])} B): json.loads {decode:6.2f} µs  + freeze {frozen:6.2f} µs "
              f"({frozen / decode:.2f}×; freeze alone {only:.2f} µs)")
        print(f"  + MappingProxyType/tuple {proxied:6.2f} µs ({proxied / decode:.2f}×); a cache re-list of "
              f"{args.docs} such documents: +{only * args.docs / 1000:.0f} ms of freezing")
    store_figures(args.docs, args.rounds)


def store_figures(docs: int, rounds: int) -> None:
    prefixes = ("desired/service/", "observed/instance/")
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite://{tmp}/state.db") as store:
        puts = [(f"desired/service/shop/s{i}", {**SERVICE, "name": f"s{i}"}) for i in range(docs)]
        puts += [(f"observed/instance/shop/s{i}-a", OBSERVED) for i in range(docs)]
        for start in range(0, len(puts), 1000):
            store.txn((), puts[start:start + 1000], ())

        def ranged() -> None:
            revision = None
            for prefix in prefixes:
                revision = store.range(prefix, revision)[1]

        def timed(fn) -> float:
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                fn()
                times.append((time.perf_counter() - start) * 1000)
            return statistics.median(times)

        memo: dict = {}
        read_snapshot(store, prefixes, memo)
        bare, frozen = timed(ranged), timed(lambda: read_snapshot(store, prefixes))
        reused = timed(lambda: read_snapshot(store, prefixes, memo))
        print(f"{2 * docs} keys (services + observed instances): store.range {bare:.0f} ms, "
              f"read_snapshot (frozen) {frozen:.0f} ms ({frozen / bare:.2f}×), read_snapshot reusing "
              f"the values frozen at the same revision (settle) {reused:.0f} ms ({reused / bare:.2f}×)")


if __name__ == "__main__":
    main()
