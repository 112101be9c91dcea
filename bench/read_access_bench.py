"""Read authorization per key (issue 12 class 5): what filtering a watch or a list costs.

A tenant-scoped reader over `--tenants` tenants; measured: one admission decision (a fresh
`ReadAccess`, i.e. one clingo run over the auth state), then `may_read` over `--keys` keys of
every tenant with the decisions remembered, beside the anchor in the same run: `read_guard` alone
(the prefix lookup, no decision) and a bare `store.range` of the same keys. Run:

    .venv/bin/python bench/read_access_bench.py [--tenants 20] [--keys 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ccattler.engine.admission import Principal
from ccattler.engine.api.read_access import ReadAccess
from ccattler.engine.facts.read_guards import read_guard
from ccattler.engine.store import open_store

ROLE = {"kind": "role", "name": "reader", "source": "auth.cca", "allow": ["service.read"], "scopes": ["t0"]}
GRANT = {"kind": "grant", "name": "g", "source": "auth.cca", "role": "reader", "to": "user", "subject": "ann"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite://{Path(tmp)}/state.db")
        keys = [f"desired/service/t{i % args.tenants}/s{i}" for i in range(args.keys)]
        store.txn((), [("desired/role/reader", ROLE), ("desired/grant/g", GRANT)], ())
        for start in range(0, len(keys), 1000):
            store.txn((), [(k, {"kind": "service"}) for k in keys[start:start + 1000]], ())
        ann = Principal("ann", "user")
        decision, filtered, guards, ranged = [], [], [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            ReadAccess(store, ann).may_read(keys[1])
            decision.append(time.perf_counter() - started)
            access = ReadAccess(store, ann)
            started = time.perf_counter()
            shown = sum(1 for k in keys if access.may_read(k))
            filtered.append(time.perf_counter() - started)
            started = time.perf_counter()
            for k in keys:
                read_guard(k)
            guards.append(time.perf_counter() - started)
            started = time.perf_counter()
            store.range("desired/service/")
            ranged.append(time.perf_counter() - started)
        store.close()
    med = statistics.median
    print(f"{args.tenants} tenants, {args.keys} keys, reader of t0 sees {shown}")
    print(f"one decision (clingo over auth state)   {med(decision) * 1e3:8.1f} ms")
    print(f"may_read over every key (remembered)    {med(filtered) * 1e3:8.1f} ms "
          f"({med(filtered) / args.keys * 1e6:.1f} µs/key, {args.tenants} decisions included)")
    print(f"anchor: read_guard alone                {med(guards) * 1e3:8.1f} ms")
    print(f"anchor: store.range of the same keys    {med(ranged) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
