"""DNS from a real container (issue 14 part 7): `cca up --nodes 1` with runc, one busybox service,
and two clients of the node's resolver — the agent's own, with the zone the DNS controller wrote:

- **latency**: sequential A queries (`--queries`, a fresh ID each) from a Python client run inside
  the container's network namespace (`ip netns exec`: the container's own veth, bridge, nftables
  and resolver address from its /etc/resolv.conf; busybox has no client that times a single
  query), p50/p99/max;
- **stalls**: busybox `nslookup` run `--lookups` times *inside* the container (`cca exec`), which
  sends A and AAAA at once from one socket — the pattern behind the 5 s stalls Kubernetes users
  hit (the conntrack race on DNAT-ed UDP) — each timed by busybox `time` (10 ms resolution):
  the slowest lookup and how many took ≥ 1 s.

    .venv/bin/python -u bench/dns_container_bench.py [--queries 3000] [--lookups 300] [--runs 3]

Needs root; leaves nothing behind (`cca down` checks its own clean-up). Target: p50 ≤ 100 µs at the
resolver, no 5 s stalls; anchors in docs/benchmarks.md ("Node-local DNS").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dns_bench import _measure, _questions

CCA = (sys.executable, "-m", "ccattler.cli.main")
SERVICE = """
service c {
    image busybox
    command "exec sleep 3600"
    instances 1
    expose 8080
    resources { cpu 50m  memory 16Mi }
}
"""
NAME = "c.default.cca.local"


class Cluster:
    """`cca up --nodes 1 --detach` in a temporary CCA_HOME and state dir; `down()` removes it."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.env = os.environ | {"CCA_HOME": str(work / "home"), "NO_COLOR": "1"}
        (work / "home").mkdir()

    def cca(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([*CCA, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise SystemExit(f"cca {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def up(self) -> None:
        from ccattler.agent.images.busybox import build_busybox
        from ccattler.agent.images.store import ImageStore
        from ccattler.engine.clientconfig import free_port_pair

        state = self.work / "state"
        build_busybox(ImageStore(state))
        port = free_port_pair()
        cidr = f"10.{random.randrange(150, 200)}.0.0/16"
        underlay = f"10.{random.randrange(201, 250)}.{random.randrange(256)}.0/24"
        self.cca("up", "--detach", "--nodes", "1", "--underlay", underlay, "--server", f"127.0.0.1:{port}",
                 "--state-dir", str(state), "--cluster-cidr", cidr, "--metrics", "off")

    def running(self) -> dict:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            rows = json.loads(self.cca("get", "instances", "-o", "json").stdout)
            rows = rows.get("items", rows) if isinstance(rows, dict) else rows
            ready = [r for r in rows if r.get("state") == "running" and r.get("ip")]
            if ready:
                return ready[0]
            time.sleep(0.5)
        raise SystemExit("the busybox instance did not start within 120 s")

    def down(self) -> None:
        done = self.cca("down", check=False)
        if done.returncode != 0 or "could not remove" in done.stdout + done.stderr:
            print(f"warning: cca down: {done.stdout}{done.stderr}", file=sys.stderr)


def netns_holding(ip: str) -> str:
    for name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split():
        out = subprocess.run(["ip", "-n", name, "-4", "-br", "addr"], capture_output=True, text=True).stdout
        if f" {ip}/" in out and "eth0" in out:
            return name
    raise SystemExit(f"no network namespace holds {ip}")


def lookups(cluster: Cluster, instance: str, count: int) -> list[float]:
    """Seconds each busybox `nslookup NAME` took inside the container (A and AAAA at once)."""
    script = f"for i in $(seq {count}); do time nslookup {NAME} >/dev/null; done 2>&1"
    out = cluster.cca("exec", instance, "--", "sh", "-c", script, timeout=count * 12 + 60, check=False).stdout
    if "exited with non-zero status" in out:
        raise SystemExit(f"a lookup of {NAME} failed inside the container:\n{out[-2000:]}")
    took = []
    for m in re.finditer(r"real\s+(?:(\d+)m\s*)?([\d.]+)s", out):
        took.append(int(m.group(1) or 0) * 60 + float(m.group(2)))
    if len(took) != count:
        raise SystemExit(f"expected {count} timings from busybox time, got {len(took)}:\n{out[-2000:]}")
    return took


def one_run(args: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix="cca-dnsbench-"))
    cluster = Cluster(work)
    try:
        cluster.up()
        (work / "c.cca").write_text(SERVICE)
        cluster.cca("apply", str(work / "c.cca"))
        inst = cluster.running()
        resolv = cluster.cca("exec", inst["name"], "--", "cat", "/etc/resolv.conf").stdout
        resolver = re.search(r"^nameserver\s+(\S+)", resolv, re.M).group(1)
        ns = netns_holding(inst["ip"])
        measured = _measure(resolver, 53, _questions([NAME]), args.queries, ["ip", "netns", "exec", ns])
        slow = lookups(cluster, inst["name"], args.lookups)
        return {**measured, "resolver": resolver, "lookup_p50_s": statistics.median(slow),
                "lookup_max_s": max(slow), "lookups_over_1s": sum(t >= 1 for t in slow),
                "lookups": len(slow)}
    finally:
        cluster.down()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=3000)
    parser.add_argument("--lookups", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: it starts a node (network namespaces, runc, nftables)")
    rows = [one_run(args) for _ in range(args.runs)]
    if args.json:
        print(json.dumps(rows))
        return
    day = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {platform.node()} {os.cpu_count()} cpus, python {platform.python_version()}, {day}, "
          f"load {os.getloadavg()[0]:.1f}")
    for n, r in enumerate(rows, 1):
        print(f"run {n}: {r['n']} queries from the container's netns to {r['resolver']}: "
              f"p50 {r['p50']:.1f} µs, p99 {r['p99']:.1f} µs, max {r['max']:.1f} µs; "
              f"{r['lookups']} busybox nslookups in the container: median {r['lookup_p50_s']:.2f} s, "
              f"slowest {r['lookup_max_s']:.2f} s, {r['lookups_over_1s']} took ≥ 1 s")


if __name__ == "__main__":
    main()
