"""The node-local resolver (agent/dns/): query latency p50/p99 in µs, sequential queries from a
client in its own process, against dnslib's threaded `DNSServer` answering from the same zone in
the same run (the issue's anchor: 424 µs p50; target ≤ 100 µs p50 at the resolver).

    .venv/bin/python -u bench/dns_bench.py [--services 10000] [--queries 3000] [--no-netns]

The zone holds `--services` services (an A and an SRV record each) and a stateful service with 3
ordinals; the header gives its build time and the time of one document's update (`Zone.updated`,
what the agent does when one service's names change), p50/p99 over 200 changes. Cases, each
`--queries` queries with a fresh ID each:

- `A, one name`: the same question again and again (the cache's best case, as a client asking its
  one backend service);
- `A, 1000 names`: cycling over 1,000 service names (every name is answered from the cache after
  its first query);
- `SRV`, `NXDOMAIN` (a search-list miss such as `example.com.default.cca.local`), `AAAA (empty)`;
- `forward`: a name outside the zone relayed to a fake upstream on another loopback address
  (answering at once: this is our relay's own cost);
- the anchor: dnslib's `DNSServer` (threaded socketserver, logging off) answering `A, one name`
  from the same zone;
- `via netns`: `A, one name` from a client in a network namespace of its own behind a veth pair,
  the resolver on the host end's address, as a container asks its node (root only; `--no-netns`
  skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import subprocess
import sys
import threading
import time

from dnslib import QTYPE, RR, A, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from ccattler.agent.dns.server import Resolver
from ccattler.agent.dns.upstream import Upstreams
from ccattler.agent.dns.zone import Zone

CLIENT = r"""
import json, socket, struct, sys, time
host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
packets = [bytes.fromhex(h) for h in json.loads(sys.stdin.read())]
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.settimeout(5)
sock.connect((host, port))
out = []
for i in range(count + 200):  # the first 200 warm up (and fill the cache)
    packet = packets[i % len(packets)]
    packet = struct.pack("!H", i & 0xFFFF) + packet[2:]
    start = time.perf_counter_ns()
    sock.send(packet)
    reply = sock.recv(4096)
    took = time.perf_counter_ns() - start
    assert reply[:2] == packet[:2]
    if i >= 200:
        out.append(took / 1000)
print(json.dumps(out))
"""


def _docs(services: int) -> list[dict]:
    docs = []
    for n in range(services):
        name = f"svc{n}.default.cca.local"
        docs.append({"service": f"default/svc{n}", "name": name, "ttl": 5, "records": [
            {"name": name, "type": "A", "address": f"10.96.{n // 250}.{n % 250 + 1}"},
            {"name": f"_8080._tcp.{name}", "type": "SRV", "priority": 0, "weight": 100, "port": 8080,
             "target": name}]})
    docs.append({"service": "default/db", "name": "db.default.cca.local", "ttl": 5, "records": [
        {"name": f"db-{i}.db.default.cca.local", "type": "A", "address": f"10.88.1.{i + 2}"}
        for i in range(3)]})
    return docs


def _questions(names: list[str], qtype: str = "A") -> list[str]:
    return [bytes(DNSRecord.question(name, qtype).pack()).hex() for name in names]


def _measure(host: str, port: int, questions: list[str], count: int, prefix: list[str] = ()) -> dict:
    done = subprocess.run([*prefix, sys.executable, "-c", CLIENT, host, str(port), str(count)],
                          input=json.dumps(questions), capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"client failed: {done.stderr}")
    took = sorted(json.loads(done.stdout))
    return {"p50": took[len(took) // 2], "p99": took[int(len(took) * 0.99)], "max": took[-1], "n": len(took)}


class _ZoneResolver(BaseResolver):
    """dnslib's server answering from the same zone (the anchor's set-up)."""

    def __init__(self, zone: Zone) -> None:
        self.zone = zone

    def resolve(self, request, handler):
        return self.zone.answer(request, str(request.q.qname).rstrip(".").lower())


def _loopback() -> str:
    return f"127.{random.randrange(1, 250)}.{random.randrange(256)}.{random.randrange(2, 250)}"


def _fake_upstream() -> tuple[socket.socket, tuple[str, int]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((_loopback(), 0))

    def serve() -> None:
        while True:
            try:
                packet, client = sock.recvfrom(4096)
            except OSError:
                return
            request = DNSRecord.parse(packet)
            reply = request.reply()
            reply.add_answer(RR(request.q.qname, QTYPE.A, ttl=60, rdata=A("192.0.2.7")))
            sock.sendto(reply.pack(), client)

    threading.Thread(target=serve, daemon=True).start()
    return sock, sock.getsockname()


def _via_netns(resolver_port_zone: list[dict], questions: list[str], count: int) -> dict:
    """A client in its own netns behind a veth; the resolver on the host end."""
    from ccattler.agent.net import netns

    tag = f"{random.randrange(16**4):04x}"
    name, host_if, peer_if = f"ccadnsb-{tag}", f"cdb{tag}h", f"cdb{tag}c"
    third = random.randrange(256)
    host_ip, client_ip = f"10.254.{third}.1", f"10.254.{third}.2"
    resolver = None
    netns.create(name)
    try:
        subprocess.run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", peer_if,
                        "netns", name], check=True)
        subprocess.run(["ip", "addr", "add", f"{host_ip}/30", "dev", host_if], check=True)
        subprocess.run(["ip", "link", "set", host_if, "up"], check=True)
        for args in (["addr", "add", f"{client_ip}/30", "dev", peer_if], ["link", "set", peer_if, "up"],
                     ["link", "set", "lo", "up"]):
            subprocess.run(["ip", "-n", name, *args], check=True)
        resolver = Resolver(host_ip, 0, Upstreams(servers=[]))
        resolver.update(resolver_port_zone)
        return _measure(host_ip, resolver.port, questions, count, ["ip", "netns", "exec", name])
    finally:
        if resolver is not None:
            resolver.stop()
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        netns.remove(name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=3_000)
    parser.add_argument("--no-netns", action="store_true")
    args = parser.parse_args()
    docs = _docs(args.services)
    started = time.perf_counter()
    zone = Zone(dict(enumerate(docs)))
    build_ms = (time.perf_counter() - started) * 1000
    update_ms = []
    for change in range(200):  # one service's VIP moves: the agent's incremental update
        n = random.randrange(args.services)
        moved = {**docs[n], "records": [{**docs[n]["records"][0], "address": f"10.97.0.{change % 250 + 1}"},
                                        docs[n]["records"][1]]}
        started = time.perf_counter()
        zone.updated({n: moved})
        update_ms.append((time.perf_counter() - started) * 1000)
    update_ms.sort()
    upstream, upstream_address = _fake_upstream()
    ours = Resolver(_loopback(), 0, Upstreams(servers=[upstream_address], timeout=1.0))
    ours.update(docs)
    one = _questions(["svc7.default.cca.local"])
    many = _questions([f"svc{n}.default.cca.local" for n in random.sample(range(args.services), 1000)])
    cases = {
        "A, one name": one,
        "A, 1000 names": many,
        "SRV": _questions(["_8080._tcp.svc7.default.cca.local"], "SRV"),
        "NXDOMAIN": _questions(["example.com.default.cca.local"]),
        "AAAA (empty)": _questions(["svc7.default.cca.local"], "AAAA"),
        "forward": _questions(["example.org"]),
    }
    rows = {}
    try:
        for case, questions in cases.items():
            rows[f"resolver: {case}"] = _measure(ours.address, ours.port, questions, args.queries)
    finally:
        ours.stop()
        upstream.close()
    anchor_address = _loopback()
    quiet = DNSLogger("-request,-reply,-truncated,-error", prefix=False, logf=lambda _: None)
    anchor = DNSServer(_ZoneResolver(zone), address=anchor_address, port=0, logger=quiet)
    anchor.start_thread()
    try:
        port = anchor.server.server_address[1]
        rows["dnslib DNSServer (anchor): A, one name"] = _measure(anchor_address, port, one, args.queries)
    finally:
        anchor.stop()
    if not args.no_netns and os.geteuid() == 0:
        rows["resolver via netns + veth: A, one name"] = _via_netns(docs, one, args.queries)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
          f"python {platform.python_version()}, {day}; zone of {args.services} services built in "
          f"{build_ms:.0f} ms, one document changed in {update_ms[100]:.1f} ms p50 "
          f"({update_ms[197]:.1f} p99); {args.queries} sequential queries per case")
    for case, row in rows.items():
        print(f"{case:<44} p50 {row['p50']:7.1f} µs   p99 {row['p99']:7.1f} µs")


if __name__ == "__main__":
    main()
