"""API apply benchmark: a 100-service file applied through the real API server (gRPC over mutual
TLS → compile → admission → one SQLite commit), the path `cca apply` takes.

Each round bumps every service's image tag and applies the whole file, so each apply updates 100
services. The baseline in the same run is the same apply called in-process (no gRPC, no TLS), so
the ratio shows what the API layer costs even on a shared machine. Run:

    .venv/bin/python bench/apply_bench.py [--services 100] [--rounds 40]

Prints p50/p99/max for the API apply and the in-process apply, and the first (all-create) apply.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ccattler.dsl import Source
from ccattler.engine.admission import Principal, apply_sources
from ccattler.engine.api.client import Client
from ccattler.engine.api.server import ApiServer, ServerOptions
from ccattler.engine.clientconfig import Context
from ccattler.engine.pki import init_cluster
from ccattler.engine.store import open_store


def shop(services: int, version: int) -> str:
    blocks = [
        f"service bench/svc{i:03d} {{\n"
        f"    image registry.local:5000/bench/app:{version}.{i}\n"
        f"    instances {1 + i % 3}\n"
        f"    expose {8000 + i}\n"
        f"    resources {{ cpu 100m  memory 64Mi }}\n"
        f"    tags {{ team = bench  tier = t{i % 4} }}\n"
        f"}}\n"
        for i in range(services)
    ]
    return "\n".join(blocks)


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return (f"p50 {statistics.median(ordered) * 1000:7.1f} ms   p99 {p99 * 1000:7.1f} ms   "
            f"max {ordered[-1] * 1000:7.1f} ms   (n={len(ordered)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = init_cluster(root / "pki", "127.0.0.1:7443")
        store = open_store(f"sqlite://{root}/api.db")
        server = ApiServer(store, files, ServerOptions(listen="127.0.0.1:0", token_listen="127.0.0.1:0",
                                                       metrics_listen=None, rate=1e6, burst=10**6,
                                                       max_message_bytes=16 << 20)).start()
        context = Context(name="bench", server=server.listen, token_server=server.token_listen,
                          ca=str(files.ca_cert), cert=str(files.admin_cert), key=str(files.admin_key))
        with Client(context) as client:
            started = time.perf_counter()
            client.apply([Source("bench.cca", shop(args.services, 0))])
            first = time.perf_counter() - started
            api = []
            for version in range(1, args.rounds + 1):
                started = time.perf_counter()
                result = client.apply([Source("bench.cca", shop(args.services, version))])
                api.append(time.perf_counter() - started)
                assert len(result["changed"]) == args.services, result
        server.stop(0)
        store.close()

        local_store = open_store(f"sqlite://{root}/local.db")
        admin = Principal("admin", "admin")
        apply_sources(local_store, admin, [Source("bench.cca", shop(args.services, 0))])
        local = []
        for version in range(1, args.rounds + 1):
            started = time.perf_counter()
            apply_sources(local_store, admin, [Source("bench.cca", shop(args.services, version))])
            local.append(time.perf_counter() - started)
        local_store.close()

    print(f"apply of a {args.services}-service file, {args.rounds} rounds, each updating every service")
    print(f"  first apply (all create) via API   {first * 1000:7.1f} ms")
    print(f"  via API (gRPC + mutual TLS)        {percentiles(api)}")
    print(f"  in-process apply_sources           {percentiles(local)}")
    print(f"  API / in-process (p50)             {statistics.median(api) / statistics.median(local):.2f}x")


if __name__ == "__main__":
    main()
