"""The eBPF data plane in the real kernel: programs attached to a cgroup of this test's own (never
the root), clients and servers in it as child processes, backends on loopback addresses.
Socket LB (balance, getpeername shows the VIP, an empty VIP refused at once, backend changes,
repair after a restart without dropping a connection) and ingress policy (allowed vs denied
sources, the host always admitted, revocation cutting a live connection)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend, PolicyIngress
from ccattler.bpf.loader import cgroup2_root

pytestmark = pytest.mark.e2e


@pytest.fixture
def plane(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("the eBPF data plane tests load BPF programs: run them as root", pytrace=False)
    from ccattler.agent.dataplane.ebpf import EbpfDataPlane

    tag = secrets.token_hex(3)
    cgroup = f"ccatest-{tag}/node"
    made = []

    def make():
        p = EbpfDataPlane(f"test-{tag}", cgroup, tmp_path, host_addresses=("127.0.0.7",))
        made.append(p)
        return p

    try:
        yield make
    finally:
        if made:
            made[-1].teardown()
        for d in (cgroup2_root() / cgroup, cgroup2_root() / f"ccatest-{tag}"):
            _rmdir_cgroup(d)


def _rmdir_cgroup(path: Path) -> None:
    if not path.exists():
        return
    for pid in (path / "cgroup.procs").read_text().split():
        try:
            os.kill(int(pid), 9)
        except ProcessLookupError:
            pass
    for _ in range(50):
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.05)


def _in_cgroup(plane_obj, code: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run `code` in a child that first moves itself into the node cgroup."""
    procs = plane_obj.programs.cgroup / "cgroup.procs"
    prologue = f"import os, socket, collections, time\nopen({str(procs)!r}, 'w').write(str(os.getpid()))\n"
    return subprocess.run([sys.executable, "-c", prologue + code], capture_output=True, text=True,
                          timeout=timeout)


class Listener:
    """A TCP server on a loopback address answering each connection with its own name."""

    def __init__(self, ip: str) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((ip, 0))
        self.sock.listen(256)
        self.ip, self.port = self.sock.getsockname()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(self.ip.encode())

    def close(self) -> None:
        self.sock.close()


VIP = Frontend("10.96.77.1", 80, "tcp")
EMPTY = Frontend("10.96.77.2", 80, "tcp")

COUNT = """
c = collections.Counter(); peers = set()
for _ in range(200):
    s = socket.create_connection(("10.96.77.1", 80), timeout=3)
    c[s.recv(32).decode()] += 1; peers.add(s.getpeername()); s.close()
print(dict(c)); print(sorted(peers))
try:
    socket.create_connection(("10.96.77.2", 80), timeout=3); print("connected")
except OSError as e:
    print("refused", e.errno)
"""


def test_socket_lb_balances_shows_vip_and_refuses_empty(plane):
    a, b = Listener("127.0.0.2"), Listener("127.0.0.3")
    try:
        dp = plane()
        state = DataPlaneState(services={VIP: (Backend(a.ip, a.port), Backend(b.ip, b.port)), EMPTY: ()})
        dp.apply(state)
        out = _in_cgroup(dp, COUNT)
        counts, peers, empty = out.stdout.splitlines()
        counts = eval(counts)
        assert set(counts) == {"127.0.0.2", "127.0.0.3"} and min(counts.values()) > 50, counts
        assert peers == "[('10.96.77.1', 80)]"
        assert empty == "refused 1"  # EPERM at connect: no timeout
        both = tuple(sorted([Backend(a.ip, a.port), Backend(b.ip, b.port)]))
        assert dp.programmed().services == {VIP: both, EMPTY: ()}

        dp.apply(DataPlaneState(services={VIP: (Backend(b.ip, b.port),)}))  # a unready, EMPTY deleted
        counts = eval(_in_cgroup(dp, COUNT).stdout.splitlines()[0])
        assert counts == {"127.0.0.3": 200}
        assert set(dp.programmed().services) == {VIP}
        assert dp.counters()["services"]["10.96.77.1:80/tcp"] >= 400
        assert dp.connection_counters() == dp.counters()["services"]  # the autoscaler's read
    finally:
        a.close()
        b.close()


def test_restart_repairs_without_dropping_a_connection(plane, tmp_path):
    a, b = Listener("127.0.0.2"), Listener("127.0.0.3")
    echo = socket.socket()
    echo.bind(("127.0.0.4", 0))
    echo.listen(4)
    try:
        dp = plane()
        held = Frontend("10.96.77.3", 81, "tcp")
        echo_backend = Backend(*echo.getsockname())
        dp.apply(DataPlaneState(services={VIP: (Backend(a.ip, a.port),), held: (echo_backend,)}))
        ready = tmp_path / "connected"
        procs = str(dp.programs.cgroup / "cgroup.procs")
        client = subprocess.Popen([sys.executable, "-c", (
            f"import os, socket, time\nopen({procs!r}, 'w').write(str(os.getpid()))\n"
            "s = socket.create_connection(('10.96.77.3', 81), timeout=10)\n"
            f"open({str(ready)!r}, 'w').write('x')\n"
            "print(s.recv(16).decode(), flush=True)\n")], stdout=subprocess.PIPE, text=True)
        conn, _ = echo.accept()
        # "Restart": a new plane over the same pins, a drifted map (a stale VIP written behind its back).
        from ccattler.bpf import maps
        dp.maps["cca_services"].update(maps.svc_key("10.96.77.9", 99, "tcp"), maps.svc_val(99, 1))
        dp2 = plane()
        desired = DataPlaneState(services={VIP: (Backend(a.ip, a.port), Backend(b.ip, b.port)),
                                           held: (echo_backend,)})
        dp2.apply(desired)
        assert set(dp2.programmed().services) == set(desired.services)
        conn.sendall(b"still-here")
        assert client.communicate(timeout=10)[0].strip() == "still-here"
        conn.close()
    finally:
        a.close()
        b.close()
        echo.close()


SERVE_ONE = """
import threading
def echo(c):
    while (data := c.recv(64)):
        c.sendall(data)
    c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.4", {port})); s.listen(16); print("ready", flush=True)
while True:
    threading.Thread(target=echo, args=(s.accept()[0],), daemon=True).start()
"""


def _connect_from(src: str, port: int, timeout: float = 1.0) -> socket.socket | None:
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    try:
        s.connect(("127.0.0.4", port))
        s.sendall(b"ping")
        if s.recv(16) != b"ping":
            raise OSError("no echo")
        return s
    except OSError:
        s.close()
        return None


#: The policy tests' identities: the guarded server's, an allowed and a denied source.
GUARDED = {"payments/db": frozenset({"127.0.0.4"}), "frontend/web": frozenset({"127.0.0.5"}),
           "frontend/other": frozenset({"127.0.0.6"})}


def _server_in_the_node(dp, program: str, kind: int) -> tuple[subprocess.Popen, int]:
    """`program` (formatted with a free port on 127.0.0.4) run in the node's container cgroup,
    once it says `ready`."""
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.4", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-c",
                               f"import os, socket\nopen({str(dp.programs.cgroup / 'cgroup.procs')!r}, 'w')"
                               ".write(str(os.getpid()))\n" + program.format(port=port)],
                              stdout=subprocess.PIPE, text=True)
    if server.stdout.readline().strip() != "ready":
        server.kill()
        server.wait()
        raise AssertionError(f"the server in the node cgroup did not start: {program[:60]!r}")
    return server, port


def test_ingress_policy_allows_denies_and_revocation_cuts(plane):
    dp = plane()
    server, port = _server_in_the_node(dp, SERVE_ONE, socket.SOCK_STREAM)
    try:
        identities = GUARDED
        policy = PolicyIngress("payments/db", frozenset({"127.0.0.4"}),
                               frozenset({("frontend/web", port, "tcp")}))
        dp.apply(DataPlaneState(identities=identities, policies={"payments/db": policy}))

        live = _connect_from("127.0.0.5", port)
        assert live is not None, "an allowed source must connect"
        assert _connect_from("127.0.0.6", port) is None, "a source no rule allows must not"
        assert _connect_from("127.0.0.7", port) is not None, "the node itself is always admitted"
        assert dp.counters()["dropped"]["payments/db"] >= 1
        assert dp.programmed().policies["payments/db"].allowed == {("frontend/web", port, "tcp")}

        # Revoke: the live connection is cut at its next packet, not only new ones.
        revoked = PolicyIngress("payments/db", frozenset(), frozenset())
        dp.apply(DataPlaneState(identities=identities, policies={"payments/db": revoked}))
        live.settimeout(1.0)
        live.sendall(b"again")
        with pytest.raises(OSError):
            if not live.recv(16):
                raise OSError("closed")
        live.close()
        assert _connect_from("127.0.0.5", port) is None

        # No policy for the destination: it is open again.
        dp.apply(DataPlaneState(identities=identities))
        assert _connect_from("127.0.0.6", port) is not None
    finally:
        server.kill()
        server.wait()


def test_inspect_reads_the_maps_with_their_counters(plane):
    """`cca node-inspect --dataplane`'s report (agent/dataplane/inspect.py) over the pinned maps:
    VIP → backends with its translation count, identities, policy tuples with admitted packets,
    drops per policed identity."""
    from ccattler.agent.dataplane.inspect import NOT_AVAILABLE, report

    a = Listener("127.0.0.2")
    dp = plane()
    server, port = _server_in_the_node(dp, SERVE_ONE, socket.SOCK_STREAM)
    try:
        identities = GUARDED
        policy = PolicyIngress("payments/db", frozenset({"127.0.0.4"}),
                               frozenset({("frontend/web", port, "tcp")}))
        dp.apply(DataPlaneState(services={VIP: (Backend(a.ip, a.port),), EMPTY: ()}, identities=identities,
                                policies={"payments/db": policy}))
        three = "for _ in range(3):\n    socket.create_connection(('10.96.77.1', 80), timeout=3).close()\n"
        connects = _in_cgroup(dp, three)
        assert connects.returncode == 0, connects.stderr
        live = _connect_from("127.0.0.5", port)
        assert live is not None
        live.close()
        assert _connect_from("127.0.0.6", port, timeout=0.5) is None

        out = report(dp, "ebpf")
        assert out["plane"] == "ebpf"
        services = {s["frontend"]: s for s in out["services"]}
        assert services["10.96.77.1:80/tcp"]["backends"] == [{"ip": a.ip, "port": a.port}]
        assert services["10.96.77.1:80/tcp"]["hits"] == 3  # one translation per connect()
        assert services["10.96.77.2:80/tcp"] == {"frontend": "10.96.77.2:80/tcp", "vip": "10.96.77.2",
                                                 "port": 80, "protocol": "tcp", "backends": [], "hits": 0}
        assert {i["identity"]: i["addresses"] for i in out["identities"]} == {
            n: sorted(ips) for n, ips in identities.items()}
        [entry] = out["policies"]
        assert entry["identity"] == "payments/db" and entry["local_addresses"] == ["127.0.0.4"]
        [allowed] = entry["allowed"]
        assert (allowed["source"], allowed["port"], allowed["protocol"]) == ("frontend/web", port, "tcp")
        assert allowed["hits"] >= 2  # packets admitted: the handshake's ACK and the data at least
        assert entry["dropped"] >= 1
        assert out["counters"]["refused"].startswith(NOT_AVAILABLE)
        assert not out["counters"]["allowed"].startswith(NOT_AVAILABLE)
    finally:
        a.close()
        server.kill()
        server.wait()


UDP_ECHO = """
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.4", {port})); print("ready", flush=True)
while True:
    data, peer = s.recvfrom(64)
    s.sendto(data, peer)  # an unconnected server's reply: sendmsg4 runs on it
"""


def _udp_ask(src: str, port: int, timeout: float = 0.5) -> bool:
    """One datagram from `src` to the UDP echo server: True when its echo came back within
    `timeout` (an answer expected: ask with a long one, it returns as soon as the echo comes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.bind((src, 0))
        s.sendto(b"ping", ("127.0.0.4", port))
        try:
            return s.recvfrom(16)[0] == b"ping"
        except OSError:
            return False


def test_udp_server_replies_do_not_open_it_to_denied_sources(plane):
    """A UDP server's replies (sendto from an unconnected socket) make no client flow of it: a source
    no rule allows gets nothing, before and after an allowed client has been served; revoking the
    allowed source cuts it although the server answered it."""
    dp = plane()
    server, port = _server_in_the_node(dp, UDP_ECHO, socket.SOCK_DGRAM)
    try:
        identities = GUARDED
        policy = PolicyIngress("payments/db", frozenset({"127.0.0.4"}),
                               frozenset({("frontend/web", port, "udp")}))
        dp.apply(DataPlaneState(identities=identities, policies={"payments/db": policy}))

        assert not _udp_ask("127.0.0.6", port), "a denied source must get no answer"
        assert _udp_ask("127.0.0.5", port, timeout=5), "an allowed source must be answered"
        assert _udp_ask("127.0.0.5", port, timeout=5)
        for _ in range(3):
            assert not _udp_ask("127.0.0.6", port), "serving an allowed client must not open the server"
        assert _udp_ask("127.0.0.7", port, timeout=5), "the node itself is always admitted"
        assert not _udp_ask("127.0.0.6", port)
        assert dp.counters()["dropped"]["payments/db"] >= 5

        revoked = PolicyIngress("payments/db", frozenset({"127.0.0.4"}), frozenset())
        dp.apply(DataPlaneState(identities=identities, policies={"payments/db": revoked}))
        assert not _udp_ask("127.0.0.5", port), "a revoked source is cut although it was answered"
    finally:
        server.kill()
        server.wait()


UDP_CLIENT = """
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.bind(("127.0.0.4", 0)); s.sendto(b"ping", ("127.0.0.6", {port}))
print(s.recvfrom(16)[0].decode(), s.getsockname()[1], flush=True)
s.settimeout(1)
try:
    print("got", s.recvfrom(16)[0].decode(), flush=True)
except OSError:
    print("nothing", flush=True)
"""


def test_udp_client_under_policy_hears_only_the_peer_it_sent_to(plane):
    """An unconnected UDP client in a policed identity gets the reply of the peer it sent to (a flow
    it opened), while another socket of that same peer address is still refused by policy."""
    dp = plane()
    identities = {"payments/db": frozenset({"127.0.0.4"}), "frontend/other": frozenset({"127.0.0.6"})}
    policy = PolicyIngress("payments/db", frozenset({"127.0.0.4"}), frozenset())
    dp.apply(DataPlaneState(identities=identities, policies={"payments/db": policy}))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
        peer.bind(("127.0.0.6", 0))
        other.bind(("127.0.0.6", 0))
        peer.settimeout(5)
        procs = str(dp.programs.cgroup / "cgroup.procs")
        client = subprocess.Popen([sys.executable, "-c",
                                   f"import os, socket\nopen({procs!r}, 'w').write(str(os.getpid()))\n"
                                   + UDP_CLIENT.format(port=peer.getsockname()[1])],
                                  stdout=subprocess.PIPE, text=True)
        try:
            data, addr = peer.recvfrom(16)
            peer.sendto(b"pong", addr)
            reply, client_port = client.stdout.readline().split()
            assert reply == "pong", "the reply on a flow the client opened passes"
            other.sendto(b"intruder", ("127.0.0.4", int(client_port)))
            assert client.stdout.readline().strip() == "nothing", "another port of the peer is policed"
        finally:
            client.kill()
            client.wait()


def test_a_failed_apply_does_not_wedge_the_plane(plane, monkeypatch):
    """Bad input is refused before anything changes, and neither it nor a bpf() call failing half
    way leaves the plane's record claiming what the kernel lacks: the next valid apply converges."""
    from ccattler.agent.dataplane.nft_changes import InvalidServiceState
    from ccattler.bpf.syscall import BpfError, Map

    dp = plane()
    first = DataPlaneState(services={VIP: (Backend("127.0.0.2", 8080),)})
    dp.apply(first)
    with pytest.raises(InvalidServiceState, match="protocol"):
        dp.apply(DataPlaneState(services={**first.services, Frontend("10.96.77.5", 80, "sctp"): ()}))
    with pytest.raises(InvalidServiceState, match="10.96.77.300"):
        dp.apply(DataPlaneState(services={Frontend("10.96.77.300", 80): ()}))
    with pytest.raises(InvalidServiceState, match="10.0.0.999"):
        dp.apply(DataPlaneState(services=first.services, identities={"a/b": frozenset({"10.0.0.999"})}))
    assert dp.programmed().services == first.services  # nothing changed
    second = DataPlaneState(services={VIP: (Backend("127.0.0.2", 8080), Backend("127.0.0.3", 8080)),
                                      Frontend("10.96.77.5", 53, "udp"): (Backend("127.0.0.3", 53),)})
    dp.apply(second)  # the refused applies left nothing behind (before: KeyError 'sctp' forever)
    assert dp.programmed().services == second.services

    real = Map.update_many

    def failing(self, pairs, chunk=8192):
        if self.info.name == "cca_services" and pairs:
            raise BpfError(28, "update in cca_services: No space left on device")
        return real(self, pairs, chunk)

    third = DataPlaneState(services={**second.services,
                                     Frontend("10.96.77.6", 80): (Backend("127.0.0.4", 80),)})
    monkeypatch.setattr(Map, "update_many", failing)
    with pytest.raises(BpfError):
        dp.apply(third)
    monkeypatch.setattr(Map, "update_many", real)
    dp.apply(third)  # the same state again: the kernel lacks the frontend, so it must be written
    assert dp.programmed().services == third.services


class UdpEcho:
    """A UDP server on a loopback address answering each datagram with its own name."""

    def __init__(self, ip: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((ip, 0))
        self.ip, self.port = self.sock.getsockname()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                _, peer = self.sock.recvfrom(64)
                self.sock.sendto(self.ip.encode(), peer)
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()


UDP_VIP = Frontend("10.96.77.10", 53, "udp")

UDP_COUNT = """
c = collections.Counter(); froms = set()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
for _ in range(100):  # unconnected: every sendto is translated, every recvfrom shows the VIP
    s.sendto(b"q", ("10.96.77.10", 53)); data, peer = s.recvfrom(32)
    c[data.decode()] += 1; froms.add(peer)
print(dict(c)); print(sorted(froms))
c = collections.Counter(); peers = set()
for _ in range(100):  # connected: translated once at connect, getpeername shows the VIP
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
    s.connect(("10.96.77.10", 53)); s.send(b"q"); data, peer = s.recvfrom(32)
    c[data.decode()] += 1; peers.add(s.getpeername()); peers.add(peer); s.close()
print(dict(c)); print(sorted(peers))
"""


def test_udp_socket_lb_translates_sendto_and_connect_and_shows_the_vip(plane):
    """Also under a deny-all policy on the client's own address: the backends' replies pass as
    replies on the flows the client's sockets opened (to the backend the VIP was translated to)."""
    a, b = UdpEcho("127.0.0.2"), UdpEcho("127.0.0.3")
    try:
        dp = plane()
        client = PolicyIngress("shop/client", frozenset({"127.0.0.1"}), frozenset())
        dp.apply(DataPlaneState(services={UDP_VIP: (Backend(a.ip, a.port), Backend(b.ip, b.port))},
                                identities={"shop/client": frozenset({"127.0.0.1"}),
                                            "shop/backend": frozenset({"127.0.0.2", "127.0.0.3"})},
                                policies={"shop/client": client}))
        out = _in_cgroup(dp, UDP_COUNT)
        assert out.returncode == 0, out.stderr
        unconnected, froms, connected, peers = out.stdout.splitlines()
        for counts in (eval(unconnected), eval(connected)):
            assert set(counts) == {"127.0.0.2", "127.0.0.3"} and min(counts.values()) > 20, counts
        assert froms == "[('10.96.77.10', 53)]", "recvfrom shows the VIP, not the backend"
        assert peers == "[('10.96.77.10', 53)]", "getpeername and recvfrom show the VIP"
        assert dp.counters()["services"]["10.96.77.10:53/udp"] == 200  # 100 sendto + 100 connect
    finally:
        a.close()
        b.close()


def test_one_service_changed_among_many_writes_only_its_entries(plane, monkeypatch):
    """`apply` is incremental: with 2,000 services programmed, one changed, one added and one
    removed write exactly their own entries, only they are validated and diffed again (the rows
    kept are not even read), and the maps hold the whole desired state afterwards (read back)."""
    from ccattler.agent.dataplane import ebpf
    from ccattler.bpf import maps

    dp = plane()

    class Kept(tuple):
        """Backends of a row the agent kept: counts how often the plane reads one."""
        reads = 0

        def __iter__(self):
            Kept.reads += 1
            return super().__iter__()

    def two(i: int) -> tuple[Backend, ...]:
        return Kept(Backend(f"10.{net}.{i // 250}.{1 + i % 250}", 80) for net in (78, 79))

    services = {Frontend(f"10.96.{i // 250}.{1 + i % 250}", 80): two(i) for i in range(2000)}
    dp.apply(DataPlaneState(services=services))
    assert dp.programmed().services == services
    seen = []
    real = ebpf.validated
    monkeypatch.setattr(ebpf, "validated", lambda kind, front, backends: seen.append(front) or
                        real(kind, front, backends))

    def slots_of(front: Frontend) -> dict[int, tuple]:
        [sid] = [maps.parse_svc_val(v)[0] for k, v in dp.maps["cca_services"].read_all().items()
                 if maps.parse_svc_key(k) == (front.ip, front.port, front.protocol)]
        return {maps.parse_backend_key(k)[1]: maps.parse_backend_val(v)
                for k, v in dp.maps["cca_backends"].read_all().items() if maps.parse_backend_key(k)[0] == sid}

    writes, Kept.reads = dp.writes, 0
    dp.apply(DataPlaneState(services=dict(services)))  # the same rows in a new dict: nothing to do
    assert dp.writes == writes and seen == [] and Kept.reads == 0

    changed = dict(services)
    one = Frontend("10.96.0.8", 80)
    changed[one] = (services[one][0], Backend("10.80.0.1", 80))  # one backend replaced: one slot
    dp.apply(DataPlaneState(services=changed))
    assert dp.writes - writes == 1 and seen == [one]
    assert Kept.reads == 0  # the 1,999 kept rows were passed over, not diffed again
    assert slots_of(one) == {0: ("10.78.0.8", 80), 1: ("10.80.0.1", 80)}

    writes, seen[:] = dp.writes, []
    grown = dict(changed)
    del grown[Frontend("10.96.1.1", 80)]  # its frontend and its 2 slots
    new = Frontend("10.96.77.3", 8080, "udp")
    grown[new] = (Backend("10.80.0.2", 53),)  # its slot and its count
    dp.apply(DataPlaneState(services=grown))
    assert dp.writes - writes == 3 + 2 and seen == [new]
    assert dp.programmed().services == grown

    writes, seen[:] = dp.writes, []
    reordered = dict(reversed(list(grown.items())))  # other order: looked up, still nothing written
    dp.apply(DataPlaneState(services=reordered))
    assert dp.writes == writes and seen == []
    dp.repair()  # after a repair, every frontend is diffed against the maps read back: no writes
    dp.apply(DataPlaneState(services=reordered))
    assert dp.writes == writes and dp.programmed().services == grown
