"""Netpolicy with an operator extension: the solve in a policy worker vs in-process (the anchor).

    .venv/bin/python bench/netpolicy_isolated_bench.py [--tenants 20] [--per-tenant 100] [--rounds 5]

`--tenants` × `--per-tenant` services; each tenant allows itself on port 80 (so every service is
default-deny with per-tenant allowed tuples); one tenant-isolation extension (rules/README.md).
Prints the median of `--rounds` whole solves: in-process (how the controller solved extensions
before issue 12: operator code in the server process) and in a policy worker
(engine/netpolicy/isolated.py: facts as symbol trees out, the decoded policy back compactly),
and whether both give the same policy.
"""

from __future__ import annotations

import argparse
import statistics
import time

from ccattler.engine.admission.policy_pool import pool
from ccattler.engine.netpolicy.evaluate import SOLVE_OPTIONS, decode_policy, evaluate
from ccattler.engine.netpolicy.facts import extension_texts, snapshot_facts
from ccattler.engine.solve import Session, load_program

ISOLATION = ('export("t0", "t1").\n'
             'policy_deny("iso", S, D) :- says(allow, D, S, _, _, _), identity(S, TS), identity(D, TD),\n'
             "    TS != TD, not export(TD, TS).\n%! program: netpolicy\n")


def world(tenants: int, per_tenant: int) -> dict:
    values: dict = {}
    for t in range(tenants):
        for s in range(per_tenant):
            values[f"desired/service/t{t}/s{s}"] = {"expose": [{"port": 80, "protocol": "tcp"}]}
        values[f"desired/network/t{t}/r{t}"] = {"action": "allow", "from": f"t{t}/*", "to": f"t{t}/*",
                                                "port": 80}
    values["desired/lp/iso"] = {"program": "netpolicy", "text": ISOLATION}
    return values


def in_process(values: dict):
    session = Session(load_program("netpolicy").with_texts(extension_texts(values)), SOLVE_OPTIONS)
    session.add_facts(list(snapshot_facts(values)))
    session.ground()
    return decode_policy(session.solve().symbols)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--per-tenant", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    values = world(args.tenants, args.per_tenant)
    pool()
    time.sleep(3)  # the workers start
    found = {}
    for name, solve in (("in-process", in_process), ("policy worker", evaluate)):
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            found[name] = solve(values)
            times.append(time.perf_counter() - start)
        tuples = sum(len(v) for v in found[name].allowed.values())
        print(f"{name:14} median {statistics.median(times):.3f} s  ({tuples} allowed tuples)")
    print("same policy:", found["in-process"] == found["policy worker"])


if __name__ == "__main__":
    main()
