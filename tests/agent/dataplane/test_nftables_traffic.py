"""Real traffic through the nftables service plane. Two "nodes" (network namespaces joined by an
underlay veth, 192.168.79.1 ↔ .2, plain routes between their container subnets standing in for the
overlay); node 1 runs the plane with bridge 10.79.1.1/24 and containers c1 (.2), c2 (.3), client
(.4); node 2 has container r1 (10.79.2.2). Each container runs a TCP server that answers
"<name> <peer address>", so a test sees which backend answered and which source it saw.
Needs root and nft; every name carries a random suffix and the fixture removes it all.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time

import pytest

from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend, PolicyIngress
from ccattler.agent.dataplane.nftables import NftablesDataPlane
from ccattler.agent.dataplane.policy_nft import run_command
from ccattler.agent.net import netns
from tests.agent.dataplane.flows import CLIENT as LIVE_CLIENT
from tests.agent.dataplane.flows import SERVER as ECHO

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("nft"), reason="needs root and nft")

SERVER = """
import socket, sys, threading
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 8080))
def udp():
    while True:
        _, peer = u.recvfrom(100); u.sendto(f"{sys.argv[1]} {peer[0]}".encode(), peer)
threading.Thread(target=udp, daemon=True).start()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(64)
while True:
    c, peer = s.accept()
    c.sendall(f"{sys.argv[1]} {peer[0]}".encode()); c.close()
"""

CLIENT = """
import json, socket, sys, time
out = []
for _ in range(int(sys.argv[3])):
    t = time.monotonic()
    try:
        if sys.argv[4] == "udp":
            c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.settimeout(2)
            c.connect((sys.argv[1], int(sys.argv[2]))); c.send(b"?")
        else:
            c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
        out.append(c.recv(100).decode()); c.close()
    except OSError as e:
        out.append(f"{type(e).__name__} {time.monotonic() - t:.3f}")
print(json.dumps(out))
"""

VIP, SVC_CIDR, NODE1, NODE2 = "10.96.0.10", "10.96.0.0/16", "192.168.79.1", "192.168.79.2"


def sh(ns: str, *argv: str) -> str:
    return run_command(["ip", "netns", "exec", ns, *argv])


class Cluster:
    def __init__(self) -> None:
        sfx = secrets.token_hex(3)
        self.ns = {r: f"vt{r}{sfx}" for r in ("n1", "n2", "c1", "c2", "cl", "r1")}
        self.bridge, self.procs = f"vb{sfx}", []
        for name in self.ns.values():
            netns.create(name)
        n1, n2 = self.ns["n1"], self.ns["n2"]
        for n in (n1, n2):
            sh(n, "ip", "link", "set", "lo", "up")
            sh(n, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        sh(n1, "ip", "link", "add", f"u1{sfx}", "type", "veth", "peer", "name", f"u2{sfx}", "netns", n2)
        sh(n1, "ip", "addr", "add", f"{NODE1}/24", "dev", f"u1{sfx}")
        sh(n2, "ip", "addr", "add", f"{NODE2}/24", "dev", f"u2{sfx}")
        sh(n1, "ip", "link", "set", f"u1{sfx}", "up")
        sh(n2, "ip", "link", "set", f"u2{sfx}", "up")
        for n, subnet, via in ((n1, 1, NODE2), (n2, 2, NODE1)):
            sh(n, "ip", "link", "add", self.bridge, "type", "bridge")
            sh(n, "ip", "addr", "add", f"10.79.{subnet}.1/24", "dev", self.bridge)
            sh(n, "ip", "link", "set", self.bridge, "up")
            sh(n, "ip", "route", "add", f"10.79.{3 - subnet}.0/24", "via", via)
        for role, n, ip in (("c1", n1, "10.79.1.2"), ("c2", n1, "10.79.1.3"), ("cl", n1, "10.79.1.4"),
                            ("r1", n2, "10.79.2.2")):
            c, host, peer = self.ns[role], f"h{role}{sfx}", f"p{role}{sfx}"
            sh(n, "ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", c)
            sh(n, "ip", "link", "set", host, "master", self.bridge, "up")
            sh(c, "ip", "addr", "add", f"{ip}/24", "dev", peer)
            sh(c, "ip", "link", "set", peer, "up")
            sh(c, "ip", "link", "set", "lo", "up")
            sh(c, "ip", "route", "add", "default", "via", ip.rsplit(".", 1)[0] + ".1")
            argv = ["ip", "netns", "exec", c, sys.executable, "-c", SERVER, role]
            self.procs.append(subprocess.Popen(argv))
        self.plane = NftablesDataPlane(self.bridge, "10.79.1.1", (NODE1,), run=self.run,
                                       service_cidr=SVC_CIDR)
        time.sleep(0.3)

    def run(self, argv, stdin=None):
        return run_command(["ip", "netns", "exec", self.ns["n1"], *argv], stdin)

    def connect(self, role: str, ip: str, port: int = 80, n: int = 1, proto: str = "tcp") -> list[str]:
        out = sh(self.ns[role], sys.executable, "-c", CLIENT, ip, str(port), str(n), proto)
        return json.loads(out)

    def close(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()
        for name in self.ns.values():
            netns.remove(name)


@pytest.fixture
def cluster():
    c = Cluster()
    try:
        yield c
    finally:
        c.close()


C1, C2 = Backend("10.79.1.2", 8080, "n1"), Backend("10.79.1.3", 8080, "n1")
R1 = Backend("10.79.2.2", 8080, "n2")


def test_vip_reaches_every_backend_and_a_removed_one_gets_nothing(cluster):
    cluster.plane.apply(DataPlaneState(services={Frontend(VIP, 80): (C1, C2, R1)}))
    answers = cluster.connect("cl", VIP, n=40)
    assert {a.split()[0] for a in answers} == {"c1", "c2", "r1"}
    # the source address is kept, on the same node and across nodes (policy depends on it)
    assert {a.split()[1] for a in answers} == {"10.79.1.4"}
    cluster.plane.apply(DataPlaneState(services={Frontend(VIP, 80): (C2, R1)}))
    assert {a.split()[0] for a in cluster.connect("cl", VIP, n=30)} == {"c2", "r1"}


def test_hairpin_and_node_originated(cluster):
    cluster.plane.apply(DataPlaneState(services={Frontend(VIP, 80): (C1,)}))
    assert cluster.connect("c1", VIP) == ["c1 10.79.1.1"]  # a backend through its own VIP (masqueraded)
    assert cluster.connect("n1", VIP)[0].startswith("c1 ")  # from the node itself (output hook)


def test_no_ready_backend_refuses_at_once(cluster):
    cluster.plane.apply(DataPlaneState(services={Frontend(VIP, 80): ()}))
    [answer] = cluster.connect("cl", VIP)
    kind, seconds = answer.split()
    assert kind == "ConnectionRefusedError" and float(seconds) < 0.5
    assert cluster.plane.counters()["refused"] >= 1


def test_external_port_answers_on_the_node_address(cluster):
    cluster.plane.apply(DataPlaneState(external={Frontend("", 443): (C2,)}))
    # from outside the node (node 2's address), to a local backend: the client's address is kept
    assert cluster.connect("n2", NODE1, 443) == [f"c2 {NODE2}"]
    # to a backend on another node: masqueraded, so the reply comes back the same way
    cluster.plane.apply(DataPlaneState(external={Frontend("", 443): (R1,)}))
    assert cluster.connect("n2", NODE1, 443) == [f"r1 {NODE1}"]
    assert cluster.plane.counters()["external"]["*:443/tcp"] >= 1


def test_udp_vip_answers_and_refuses_without_backends(cluster):
    cluster.plane.apply(DataPlaneState(services={Frontend(VIP, 53, "udp"): (Backend("10.79.2.2", 8080),),
                                                 Frontend("10.96.0.11", 53, "udp"): ()}))
    assert cluster.connect("cl", VIP, 53, proto="udp") == ["r1 10.79.1.4"]
    [answer] = cluster.connect("cl", "10.96.0.11", 53, proto="udp")  # icmp port unreachable
    assert answer.split()[0] == "ConnectionRefusedError" and float(answer.split()[1]) < 0.5


def test_policy_sees_the_real_source_behind_a_vip(cluster):
    """One plane object carries services and policy: c1 (shop/db) admits only the client's identity;
    through the VIP, the client gets in and c2 (another identity) is dropped."""
    cluster.plane.apply(DataPlaneState(
        services={Frontend(VIP, 80): (C1,)},
        identities={"shop/db": frozenset({"10.79.1.2"}), "shop/api": frozenset({"10.79.1.4"}),
                    "shop/other": frozenset({"10.79.1.3"})},
        policies={"shop/db": PolicyIngress("shop/db", frozenset({"10.79.1.2"}),
                                           frozenset({("shop/api", 8080, "tcp")}))}))
    assert cluster.connect("cl", VIP) == ["c1 10.79.1.4"]
    assert cluster.connect("c2", VIP)[0].startswith("TimeoutError")


UDP_CLIENT = """
import socket, sys
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.settimeout(2); c.connect((sys.argv[1], 53))
for line in sys.stdin:
    c.send(b"?"); print(c.recv(100).decode().split()[0], flush=True)
"""


def test_a_removed_udp_backend_loses_its_flows(cluster):
    """Same client socket (one conntrack entry) before and after its backend is replaced."""
    cluster.plane.apply(DataPlaneState(services={Frontend(VIP, 53, "udp"): (R1,)}))
    argv = ["ip", "netns", "exec", cluster.ns["cl"], sys.executable, "-c", UDP_CLIENT, VIP]
    client = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cluster.procs.append(client)

    def ask() -> str:
        client.stdin.write("\n")
        client.stdin.flush()
        return client.stdout.readline().strip()

    assert ask() == "r1"
    cluster.plane.apply(DataPlaneState(services={Frontend(VIP, 53, "udp"): (C2,)}))
    assert ask() == "c2"  # r1 is still up: only the deleted conntrack entry sends this to c2


def test_a_connection_attempt_to_a_removed_dead_backend_is_translated_anew(cluster):
    """A backend that never answers (a lost node's: 10.79.2.99 holds no host) leaves the service
    while a client waits on its SYN: the unanswered conntrack entry is deleted with the backend, so
    the client's SYN retransmission (1 s later) is translated anew and c2 answers the same connect().
    Kept, the entry would send every retransmission, and a new connection that reuses the client's
    source port within 120 s, to the dead backend."""
    dead = Backend("10.79.2.99", 8080, "n2")
    cluster.plane.apply(DataPlaneState(services={Frontend(VIP, 80): (dead,)}))
    argv = ["ip", "netns", "exec", cluster.ns["cl"], sys.executable, "-c", CLIENT, VIP, "80", "1", "tcp"]
    client = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)  # one connect(), 2 s to answer
    cluster.procs.append(client)
    time.sleep(0.4)  # its first SYN went to the dead backend
    cluster.plane.apply(DataPlaneState(services={Frontend(VIP, 80): (C2,)}))
    [answer] = json.loads(client.communicate(timeout=10)[0])
    assert answer == "c2 10.79.1.4", answer


def test_inspect_reads_the_kernel_with_its_counters(cluster):
    """`cca node-inspect --dataplane`'s report (agent/dataplane/inspect.py) on the real table:
    VIP → backends, identities, policy tuples, and the element/drop counters after real traffic."""
    from ccattler.agent.dataplane.inspect import NOT_AVAILABLE, report

    cluster.plane.apply(DataPlaneState(
        services={Frontend(VIP, 80): (C1,), Frontend("10.96.0.11", 80): ()},
        external={Frontend("", 443): (C2,)},
        identities={"shop/db": frozenset({"10.79.1.2"}), "shop/api": frozenset({"10.79.1.4"}),
                    "shop/other": frozenset({"10.79.1.3"})},
        policies={"shop/db": PolicyIngress("shop/db", frozenset({"10.79.1.2"}),
                                           frozenset({("shop/api", 8080, "tcp")}))}))
    assert cluster.connect("cl", VIP, n=3) == ["c1 10.79.1.4"] * 3
    assert cluster.connect("c2", VIP)[0].startswith("TimeoutError")  # dropped by shop/db's policy
    assert cluster.connect("cl", "10.96.0.11")[0].startswith("ConnectionRefusedError")
    out = report(cluster.plane, "nftables")
    assert out["plane"] == "nftables"
    services = {s["frontend"]: s for s in out["services"]}
    assert services[f"{VIP}:80/tcp"]["backends"] == [{"ip": "10.79.1.2", "port": 8080}]
    # new connections: the nat hook sees each once (a dropped SYN is never confirmed: its retries
    # count again, so c2 adds one or more)
    assert services[f"{VIP}:80/tcp"]["hits"] >= 4
    connections = cluster.plane.connection_counters()  # the autoscaler's read: the services map only
    assert connections[f"{VIP}:80/tcp"] == services[f"{VIP}:80/tcp"]["hits"]
    assert services["10.96.0.11:80/tcp"]["backends"] == [] and out["refused"] >= 1
    assert out["external"] == [{"frontend": "*:443/tcp", "port": 443, "protocol": "tcp",
                                "backends": [{"ip": "10.79.1.3", "port": 8080}], "hits": 0}]
    assert {i["identity"]: i["addresses"] for i in out["identities"]} == {
        "shop/db": ["10.79.1.2"], "shop/api": ["10.79.1.4"], "shop/other": ["10.79.1.3"]}
    [policy] = out["policies"]
    assert policy["identity"] == "shop/db" and policy["local_addresses"] == ["10.79.1.2"]
    # the tuple's element counter: new connections admitted (the guarded chain sees only packets not
    # of an established flow: the 3 SYNs from the client)
    assert policy["allowed"] == [{"source": "shop/api", "port": 8080, "protocol": "tcp", "hits": 3}]
    assert policy["dropped"] >= 1  # c2's SYN (and its retries)
    assert not out["counters"]["allowed"].startswith(NOT_AVAILABLE)
    assert out["counters"]["backends"].startswith(NOT_AVAILABLE)


def test_revoking_an_allow_cuts_a_live_flow_through_the_vip(cluster):
    """A connection opened to a same-node VIP (DNAT-ed to c1, shop/db) ends when its allow is
    revoked, like a direct one: its conntrack entry's original destination is the VIP, so the
    flows are found by their reply source (the backend)."""
    echo = ["ip", "netns", "exec", cluster.ns["c1"], sys.executable, "-c", ECHO]
    cluster.procs.append(subprocess.Popen(echo))
    identities = {"shop/db": frozenset({"10.79.1.2"}), "shop/api": frozenset({"10.79.1.4"}),
                  "shop/other": frozenset({"10.79.1.3"})}

    def state(*allowed):
        return DataPlaneState(services={Frontend(VIP, 5432): (Backend("10.79.1.2", 5432, "n1"),)},
                              identities=identities,
                              policies={"shop/db": PolicyIngress("shop/db", frozenset({"10.79.1.2"}),
                                                                 frozenset(allowed))})

    cluster.plane.apply(state(("shop/api", 5432, "tcp")))
    time.sleep(0.2)  # the echo server binds
    clients = {}
    for name, ip in (("vip", VIP), ("direct", "10.79.1.2")):
        argv = ["ip", "netns", "exec", cluster.ns["cl"], sys.executable, "-c", LIVE_CLIENT, ip]
        clients[name] = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        cluster.procs.append(clients[name])

    def ask(name: str) -> str:
        clients[name].stdin.write("\n")
        clients[name].stdin.flush()
        return clients[name].stdout.readline().strip()

    assert ask("vip") == "ok" and ask("direct") == "ok"
    cluster.plane.apply(state(("shop/api", 5432, "tcp"), ("shop/other", 80, "tcp")))  # a grant: kept
    assert ask("vip") == "ok" and ask("direct") == "ok"
    cluster.plane.apply(state(("shop/other", 80, "tcp")))  # api → db revoked
    assert ask("vip") == "cut" and ask("direct") == "cut"
    listed = cluster.run(["conntrack", "-L", "-p", "tcp", "--dport", "5432", "-s", "10.79.1.4"])
    assert "ESTABLISHED" not in listed


LATE_ECHO = """
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5433)); s.listen(4)
c, _ = s.accept()
while (data := c.recv(100)):
    time.sleep(1.0); c.sendall(data)  # answers late: after the test has revoked the allow
"""

SEND_THEN_READ = """
import socket, sys
c = socket.create_connection((sys.argv[1], 5433), timeout=2.5)
for line in sys.stdin:
    try:
        if line.strip() == "send":
            c.sendall(b"x"); print("sent", flush=True)
        else:
            print("ok" if c.recv(10) == b"x" else "bad", flush=True)
    except OSError:
        print("cut", flush=True)
"""


def test_a_revoked_flow_stays_cut_when_the_guarded_side_speaks_first(cluster):
    """The server (shop/db) answers after its allow is revoked and its flow's entry deleted. Its
    packet must not start a new tracked flow mid-stream (the kernel's loose pickup): from an
    address whose own egress is open it would pass, and the client's packets would pass as its
    replies — the revoked flow revived. A new TCP flow must start with a SYN."""
    cluster.procs.append(subprocess.Popen(["ip", "netns", "exec", cluster.ns["c1"], sys.executable,
                                           "-c", LATE_ECHO]))
    identities = {"shop/db": frozenset({"10.79.1.2"}), "shop/api": frozenset({"10.79.1.4"})}

    def state(*allowed):
        return DataPlaneState(identities=identities,
                              policies={"shop/db": PolicyIngress("shop/db", frozenset({"10.79.1.2"}),
                                                                 frozenset(allowed))})

    cluster.plane.apply(state(("shop/api", 5433, "tcp")))
    time.sleep(0.2)  # the server binds
    client = subprocess.Popen(["ip", "netns", "exec", cluster.ns["cl"], sys.executable, "-c",
                               SEND_THEN_READ, "10.79.1.2"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cluster.procs.append(client)

    def ask(line: str) -> str:
        client.stdin.write(line + "\n")
        client.stdin.flush()
        return client.stdout.readline().strip()

    assert ask("send") == "sent" and ask("read") == "ok"  # allowed: the late answer arrives
    assert ask("send") == "sent"
    cluster.plane.apply(state())  # revoked while the server holds its answer
    assert ask("read") == "cut"  # the server's late answer is dropped, not tracked as a new flow
    assert ask("send") == "sent" and ask("read") == "cut"


def test_a_guarded_backend_drops_external_clients_and_accepts_the_gateway(cluster):
    """The documented limit (docs/agent.md, "Network policy"): an external client's address is no
    identity, so a guarded backend behind an external port drops it; the node itself (the bridge
    gateway: probes, node-originated and same-node gate connections) always gets in."""
    cluster.plane.apply(DataPlaneState(
        services={Frontend(VIP, 80): (C1,)}, external={Frontend("", 443): (C1,)},
        identities={"shop/db": frozenset({"10.79.1.2"}), "shop/api": frozenset({"10.79.1.4"})},
        policies={"shop/db": PolicyIngress("shop/db", frozenset({"10.79.1.2"}),
                                           frozenset({("shop/api", 8080, "tcp")}))}))
    assert cluster.connect("cl", VIP) == ["c1 10.79.1.4"]  # allowed identity
    assert cluster.connect("n2", NODE1, 443)[0].startswith("TimeoutError")  # external: no identity
    assert cluster.connect("n1", "10.79.1.2", 8080) == ["c1 10.79.1.1"]  # the host, from the gateway
    assert cluster.connect("n1", VIP)[0].startswith("c1 ")
