"""Store benchmark: SQLite (durable file) and a real local etcd side by side, against raw SQLite.

Measures single-key txns/s (one writer, then 8 writer threads), keys/s in 100-op txns, a 10k-key
range, and watch delivery latency (from the start of the `put` call to the event reaching the
watcher). Run:

    .venv/bin/python bench/store_bench.py [--rounds 3] [--singles 2000]

Figures are medians over `--rounds`; the machine is shared, so compare the ratios to raw SQLite.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import threading
import time

from ccattler.engine.store import Store, open_store
from ccattler.engine.store.etcd_process import EtcdProcess

BATCH = 100
RANGE_KEYS = 10_000
WATCH_SAMPLES = 400
WRITERS = 8


def raw_sqlite(directory: str, singles: int) -> dict[str, float]:
    """The floor: durable single-row commits and 100-row batches with sqlite3 alone."""
    path = os.path.join(directory, "raw.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID")
    value = b'{"replicas":3}'
    start = time.perf_counter()
    for i in range(singles):
        conn.execute("BEGIN")
        conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (f"s/{i}", value))
        conn.execute("COMMIT")
    single = singles / (time.perf_counter() - start)
    start = time.perf_counter()
    batches = RANGE_KEYS // BATCH
    for b in range(batches):
        conn.execute("BEGIN")
        conn.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?)",
                         [(f"b/{b}/{i}", value) for i in range(BATCH)])
        conn.execute("COMMIT")
    batched = batches * BATCH / (time.perf_counter() - start)
    conn.close()
    os.remove(path)
    return {"single txns/s": single, "batched keys/s": batched}


def measure(store: Store, singles: int, tag: str) -> dict[str, float]:
    value = {"image": "busybox", "replicas": 3, "ports": [80, 443]}
    start = time.perf_counter()
    for i in range(singles):
        store.put(f"{tag}/single/{i:06}", value)
    single = singles / (time.perf_counter() - start)
    concurrent = concurrent_puts(store, singles, f"{tag}/concurrent")

    batches = RANGE_KEYS // BATCH
    start = time.perf_counter()
    for b in range(batches):
        store.txn(puts=[(f"{tag}/batch/{b:04}/{i:03}", value) for i in range(BATCH)])
    batched = batches * BATCH / (time.perf_counter() - start)

    start = time.perf_counter()
    facts, _ = store.range(f"{tag}/batch/")
    range_ms = (time.perf_counter() - start) * 1000
    assert len(facts) == RANGE_KEYS

    p50, p99, commit_p99 = watch_latency(store, tag)
    return {"single txns/s": single, f"{WRITERS} writers txns/s": concurrent, "batched keys/s": batched,
            "range 10k ms": range_ms, "watch p50 ms": p50, "watch p99 ms": p99, "its put p99 ms": commit_p99}


def concurrent_puts(store: Store, total: int, prefix: str) -> float:
    """Single-key txns/s with WRITERS threads writing at once (what an API server sees)."""
    each = total // WRITERS

    def write(writer: int) -> None:
        for i in range(each):
            store.put(f"{prefix}/{writer}/{i:06}", {"writer": writer, "i": i})

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(WRITERS)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return each * WRITERS / (time.perf_counter() - start)


def watch_latency(store: Store, tag: str) -> tuple[float, float, float]:
    """Put → event p50 and p99, and the p99 of the puts themselves (the durable commit's share)."""
    sent: dict[str, float] = {}
    commits: list[float] = []
    delays: list[float] = []
    done = threading.Event()
    watch = store.watch(f"{tag}/watch/")

    def receive() -> None:
        while len(delays) < WATCH_SAMPLES:
            event = watch.get(timeout=10)
            if event is None:
                break
            delays.append(time.perf_counter() - sent[event.key])
        done.set()

    receiver = threading.Thread(target=receive)
    receiver.start()
    time.sleep(0.2)  # let an etcd watch stream connect before the clock starts
    for i in range(WATCH_SAMPLES):
        key = f"{tag}/watch/{i:05}"
        sent[key] = time.perf_counter()
        store.put(key, i)
        commits.append(time.perf_counter() - sent[key])
        time.sleep(0.002)
    done.wait(30)
    watch.cancel()
    receiver.join()
    delays.sort()
    commits.sort()
    p99 = int(len(delays) * 0.99) - 1
    return delays[len(delays) // 2] * 1000, delays[p99] * 1000, commits[p99] * 1000


TARGETS = {
    ("sqlite", "single txns/s"): ">= 3,000",
    ("sqlite", "batched keys/s"): ">= 50,000",
    ("sqlite", "watch p99 ms"): "<= 5",
    ("etcd", "batched keys/s"): ">= 10,000",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="repeat and report medians")
    parser.add_argument("--singles", type=int, default=2000, help="single-key txns per round")
    args = parser.parse_args()

    results: dict[str, list[dict[str, float]]] = {"raw sqlite": [], "sqlite": [], "etcd": []}
    with tempfile.TemporaryDirectory(prefix="cca-bench-", dir="/var/tmp") as directory, EtcdProcess() as etcd:
        for round_ in range(args.rounds):
            results["raw sqlite"].append(raw_sqlite(directory, args.singles))
            with open_store(f"sqlite://{directory}/state-{round_}.db") as store:
                results["sqlite"].append(measure(store, args.singles, f"r{round_}"))
            with open_store(f"{etcd.url}?prefix=/bench-{round_}/") as store:
                results["etcd"].append(measure(store, args.singles, f"r{round_}"))

    metrics = ["single txns/s", f"{WRITERS} writers txns/s", "batched keys/s", "range 10k ms",
               "watch p50 ms", "watch p99 ms", "its put p99 ms"]
    print(f"store benchmark: {os.cpu_count()} cores, {args.rounds} rounds (medians), "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"{'metric':<18}{'raw sqlite':>12}{'sqlite':>12}{'target':>12}{'etcd':>12}{'target':>12}")
    for metric in metrics:
        cells = []
        for backend in ("raw sqlite", "sqlite", "etcd"):
            values = [result[metric] for result in results[backend] if metric in result]
            cells.append(f"{statistics.median(values):>12,.1f}" if values else f"{'-':>12}")
        print(f"{metric:<18}{cells[0]}{cells[1]}{TARGETS.get(('sqlite', metric), ''):>12}"
              f"{cells[2]}{TARGETS.get(('etcd', metric), ''):>12}")
    for metric in ("single txns/s", "batched keys/s"):
        ratio = statistics.median(r[metric] for r in results["sqlite"]) / statistics.median(
            r[metric] for r in results["raw sqlite"])
        print(f"sqlite backend / raw sqlite, {metric}: {ratio:.2f}")


if __name__ == "__main__":
    main()
