"""`cca node-inspect --dataplane` on the agent's side: how long `agent/dataplane/inspect.report`
takes to read an nftables plane back (table listing, element counters, policy table and its tuple
counters) at N services with 2 backends each and 100 guarded identities with 10 allowed sources each.

    .venv/bin/python -u bench/inspect_bench.py [--sizes 1000,10000] [--rounds 5]

Needs root and nft. Runs itself again inside a scratch network namespace (`--inner`), as an agent
does in its node's namespace, and removes the namespace afterwards. Prints per size the median of
`--rounds` reports, the report's size as JSON, and the anchor in the same run: the same two tables
listed by hand with `nft list table` (the nft command: what an operator would read without
node-inspect, unparsed). NodeInspect waits 15 s for a node's answer.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import time


def inner(sizes: list[int], rounds: int) -> dict:
    from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend, PolicyIngress
    from ccattler.agent.dataplane.inspect import report
    from ccattler.agent.dataplane.nftables import NftablesDataPlane

    bridge = f"ib{secrets.token_hex(3)}"
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    subprocess.run(["ip", "addr", "add", "10.99.0.1/16", "dev", bridge], check=True)
    out = {}
    plane = NftablesDataPlane(bridge, "10.99.0.1", ("192.168.99.1",))
    try:
        for n in sizes:
            services = {Frontend(f"10.96.{i // 250}.{1 + i % 250}", 80):
                        tuple(Backend(f"10.{100 + (2 * i + k) // 62500}.{((2 * i + k) // 250) % 250}."
                                      f"{2 + (2 * i + k) % 250}", 8080) for k in range(2))
                        for i in range(n)}
            identities = {f"t/s{i}": frozenset({f"10.99.{i // 250}.{2 + i % 250}"}) for i in range(1000)}
            policies = {f"t/s{d}": PolicyIngress(f"t/s{d}", identities[f"t/s{d}"],
                                                 frozenset((f"t/s{100 + 10 * d + k}", 8080, "tcp")
                                                           for k in range(10)))
                        for d in range(100)}
            plane.apply(DataPlaneState(services=services, identities=identities, policies=policies))
            times, size = [], 0
            for _ in range(rounds):
                t = time.perf_counter()
                found = report(plane, "nftables")
                times.append(time.perf_counter() - t)
                size = len(json.dumps(found))
            assert len(found["services"]) == n and len(found["policies"]) == 100
            floor = []  # the anchor: the same two tables listed by hand with the nft command
            for _ in range(rounds):
                t = time.perf_counter()
                subprocess.run(["nft", "list", "table", "ip", plane.table], check=True, capture_output=True)
                subprocess.run(["nft", "list", "table", "inet", plane.policy.table], check=True,
                               capture_output=True)
                floor.append(time.perf_counter() - t)
            out[n] = {"report_s_p50": round(statistics.median(times), 3),
                      "nft_list_both_tables_s_p50": round(statistics.median(floor), 3), "json_bytes": size}
    finally:
        plane.teardown()
        subprocess.run(["ip", "link", "del", bridge], check=False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inner", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.inner:
        print(json.dumps(inner(sizes, args.rounds)))
        return
    from ccattler.agent.net import netns

    ns = f"ibn{secrets.token_hex(3)}"
    netns.create(ns)
    try:
        argv = [sys.executable, "-u", __file__, "--inner", "--sizes", args.sizes,
                "--rounds", str(args.rounds)]
        done = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, check=True)
        print(done.stdout.strip())
    finally:
        netns.remove(ns)


if __name__ == "__main__":
    main()
