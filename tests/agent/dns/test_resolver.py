"""The node-local resolver on a real UDP/TCP socket (127.0.0.x, a kernel-picked port), in process:
cluster names answered from `derived/dns` documents, other names forwarded to a fake upstream,
and bad input never ending it."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from dnslib import QTYPE, RCODE, RR, A, DNSRecord

from ccattler.agent.dns.answers import Answers
from ccattler.agent.dns.server import Resolver, ResolverError
from ccattler.agent.dns.upstream import Upstreams, nameservers

DOCS = [
    {"service": "default/web", "name": "web.default.cca.local", "ttl": 5, "records": [
        {"name": "web.default.cca.local", "type": "A", "address": "10.96.0.3"},
        {"name": "_8080._tcp.web.default.cca.local", "type": "SRV", "priority": 0, "weight": 100,
         "port": 8080, "target": "web.default.cca.local"}]},
    {"service": "payments/db", "name": "db.payments.cca.local", "ttl": 5, "records": [
        {"name": "db.payments.cca.local", "type": "A", "address": "10.96.0.4"},
        {"name": "db-0.db.payments.cca.local", "type": "A", "address": "10.88.1.7"}]},
]


def _loopback() -> str:
    return f"127.{random.randrange(1, 250)}.{random.randrange(256)}.{random.randrange(2, 250)}"


class FakeUpstream:
    """A UDP 'host resolver' answering every A query with 192.0.2.7 (or never, when `silent`)."""

    def __init__(self, silent: bool = False) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((_loopback(), 0))
        self.address = self.sock.getsockname()
        self.silent, self.asked = silent, []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                packet, client = self.sock.recvfrom(4096)
            except OSError:
                return
            request = DNSRecord.parse(packet)
            self.asked.append(str(request.q.qname))
            if not self.silent:
                reply = request.reply()
                reply.add_answer(RR(request.q.qname, QTYPE.A, ttl=60, rdata=A("192.0.2.7")))
                self.sock.sendto(reply.pack(), client)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    fake = FakeUpstream()
    yield fake
    fake.close()


@pytest.fixture
def resolver(upstream: FakeUpstream) -> Iterator[Resolver]:
    server = Resolver(_loopback(), 0, Upstreams(servers=[upstream.address], timeout=0.5))
    server.update(DOCS)
    yield server
    server.stop()


def ask(server: Resolver, name: str, qtype: str = "A", tcp: bool = False) -> DNSRecord:
    return DNSRecord.parse(DNSRecord.question(name, qtype).send(server.address, server.port, tcp=tcp,
                                                                  timeout=3))


def test_a_service_name_answers_its_vip_with_a_short_ttl(resolver):
    reply = ask(resolver, "web.default.cca.local")
    assert reply.header.rcode == RCODE.NOERROR and reply.header.aa
    assert [(str(rr.rdata), rr.ttl) for rr in reply.rr] == [("10.96.0.3", 5)]
    assert str(ask(resolver, "DB-0.db.Payments.cca.local.").rr[0].rdata) == "10.88.1.7"  # case-blind
    assert str(ask(resolver, "web.default.cca.local", tcp=True).rr[0].rdata) == "10.96.0.3"


def test_srv_names_the_port_and_carries_the_target_address(resolver):
    reply = ask(resolver, "_8080._tcp.web.default.cca.local", "SRV")
    srv = reply.rr[0].rdata
    assert (srv.priority, srv.weight, srv.port, str(srv.target)) == (0, 100, 8080, "web.default.cca.local.")
    assert [str(rr.rdata) for rr in reply.ar] == ["10.96.0.3"]


def test_aaaa_and_other_types_are_empty_at_once_and_unknown_names_nxdomain(resolver):
    for qtype in ("AAAA", "MX", "TXT"):
        reply = ask(resolver, "web.default.cca.local", qtype)
        assert reply.header.rcode == RCODE.NOERROR and not reply.rr
        assert reply.auth and reply.auth[0].rtype == QTYPE.SOA  # negative answers are cacheable
    assert ask(resolver, "default.cca.local").header.rcode == RCODE.NOERROR  # a name with names below
    for name in ("nope.default.cca.local", "example.com.default.cca.local", "web-9.web.default.cca.local"):
        assert ask(resolver, name).header.rcode == RCODE.NXDOMAIN, name


def test_a_new_zone_replaces_cached_answers(resolver):
    assert str(ask(resolver, "web.default.cca.local").rr[0].rdata) == "10.96.0.3"
    moved = [{**DOCS[0], "records": [{"name": "web.default.cca.local", "type": "A", "address": "10.96.0.9"}]}]
    resolver.update(moved)
    assert str(ask(resolver, "web.default.cca.local").rr[0].rdata) == "10.96.0.9"
    assert ask(resolver, "db.payments.cca.local").header.rcode == RCODE.NXDOMAIN


def test_other_names_are_forwarded_to_the_host_resolvers(resolver, upstream):
    for tcp in (False, True):
        if tcp:  # the fake upstream is UDP only: TCP forwarding fails over to SERVFAIL
            assert ask(resolver, "example.org", tcp=True).header.rcode == RCODE.SERVFAIL
            continue
        reply = ask(resolver, "example.org")
        assert [str(rr.rdata) for rr in reply.rr] == ["192.0.2.7"]
    assert "example.org." in upstream.asked


def test_a_silent_upstream_gets_servfail_within_the_timeout_never_a_hang():
    silent = FakeUpstream(silent=True)
    server = Resolver(_loopback(), 0, Upstreams(servers=[silent.address], timeout=0.3))
    try:
        started = time.monotonic()
        assert ask(server, "example.org").header.rcode == RCODE.SERVFAIL
        assert time.monotonic() - started < 2.0
        empty = Resolver(_loopback(), 0, Upstreams(servers=[], timeout=0.3))
        try:
            assert ask(empty, "example.org").header.rcode == RCODE.SERVFAIL
        finally:
            empty.stop()
    finally:
        server.stop()
        silent.close()


def test_malformed_packets_are_dropped_or_formerr_and_the_resolver_goes_on(resolver):
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.settimeout(1.0)
    try:
        for junk in (b"", b"\x01", b"\x12\x34" + b"\xff" * 40, b"\xab\xcd\x01\x00\x00\x01" + b"\x00" * 6):
            client.sendto(junk, (resolver.address, resolver.port))
        replies = []
        for _ in range(2):
            try:
                replies.append(DNSRecord.parse(client.recv(4096)))
            except TimeoutError:
                break
        assert replies and all(r.header.rcode == RCODE.FORMERR for r in replies)
        assert {r.header.id for r in replies} <= {0x1234, 0xABCD}
        # a response is never answered (no loops between resolvers)
        response = DNSRecord.question("web.default.cca.local").reply().pack()
        client.sendto(response, (resolver.address, resolver.port))
        with pytest.raises(TimeoutError):
            client.recv(4096)
    finally:
        client.close()
    assert str(ask(resolver, "web.default.cca.local").rr[0].rdata) == "10.96.0.3"


def test_cached_answers_carry_each_query_id_and_question_case():
    answers = Answers()
    from ccattler.agent.dns.zone import Zone

    answers.set_zone(Zone(DOCS))
    first = DNSRecord.question("web.default.cca.local")
    again = DNSRecord.question("web.default.cca.local")
    again.header.id = (first.header.id + 1) % 65536
    one, two = (DNSRecord.parse(answers.answer(bytes(q.pack()))) for q in (first, again))
    assert (one.header.id, two.header.id) == (first.header.id, again.header.id)
    mixed = DNSRecord.parse(answers.answer(bytes(DNSRecord.question("wEb.default.cca.local").pack())))
    assert str(mixed.q.qname) == "wEb.default.cca.local."


def test_a_taken_port_is_a_clear_error(resolver):
    with pytest.raises(ResolverError, match="cannot listen"):
        Resolver(resolver.address, resolver.port)


def test_host_nameservers_are_read_from_resolv_conf(tmp_path):
    conf = tmp_path / "resolv.conf"
    conf.write_text("# x\nnameserver 10.0.0.2\nnameserver bogus\nsearch example\nnameserver fe80::1%eth0\n"
                    "nameserver 10.88.0.1\n")
    assert nameservers(conf.read_text()) == ["10.0.0.2", "fe80::1", "10.88.0.1"]
    assert Upstreams(conf, exclude=("10.88.0.1",)).servers() == [("10.0.0.2", 53), ("fe80::1", 53)]


def test_an_answer_too_big_for_udp_is_truncated_and_whole_over_tcp(resolver):
    many = {"service": "default/kv", "name": "kv.default.cca.local", "ttl": 5, "records": [
        {"name": "kv.default.cca.local", "type": "A", "address": f"10.88.1.{n}"} for n in range(2, 62)]}
    resolver.update([*DOCS, many])
    udp = ask(resolver, "kv.default.cca.local")
    assert udp.header.tc and not udp.rr
    assert len(ask(resolver, "kv.default.cca.local", tcp=True).rr) == 60
