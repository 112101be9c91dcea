"""The cluster zone as the resolver serves it: the `derived/dns/<tenant>/<service>` documents of
the node's slice folded into name → records (engine/controllers/dns.py writes them).

`answer(request)` builds the reply to one parsed query for a name inside `cca.local` with dnslib:
A and SRV from the records (SRV with its targets' addresses as additional records), ANY both,
every other type an empty NOERROR; a name that only has names below it (`default.cca.local`) an
empty NOERROR too, an unknown one NXDOMAIN — both with the zone's SOA so clients cache the
negative answer for the TTL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from dnslib import EDNS0, QTYPE, RCODE, RR, SOA, SRV, A, DNSRecord

ZONE = "cca.local"
DEFAULT_TTL = 5


def in_zone(name: str) -> bool:
    """`name` (lower case, no trailing dot) is the cluster zone or below it."""
    return name == ZONE or name.endswith("." + ZONE)


class Zone:
    """name → its A addresses and SRV records; every name between them and the zone's apex."""

    def __init__(self, docs: Iterable[Mapping[str, Any]] = (), ttl: int = DEFAULT_TTL) -> None:
        self.ttl = ttl
        self.a: dict[str, list[str]] = defaultdict(list)
        self.srv: dict[str, list[tuple[int, int, int, str]]] = defaultdict(list)
        for doc in docs:
            if isinstance(doc.get("ttl"), int):
                self.ttl = doc["ttl"]
            for record in doc.get("records") or []:
                self._add(record)
        self.a, self.srv = dict(self.a), dict(self.srv)
        self.nodes = {ZONE}  # every name that exists, with or without records of its own
        for name in (*self.a, *self.srv):
            labels = name.split(".")
            self.nodes.update(".".join(labels[i:]) for i in range(len(labels) - 1))
        self.soa = RR(ZONE, QTYPE.SOA, ttl=self.ttl,
                      rdata=SOA(f"ns.{ZONE}", f"hostmaster.{ZONE}", (1, 3600, 600, 86400, self.ttl)))

    def _add(self, record: Any) -> None:
        if not isinstance(record, Mapping) or not isinstance(record.get("name"), str):
            return  # a malformed record contributes nothing
        name = record["name"].lower().rstrip(".")
        if not in_zone(name):
            return
        if record.get("type") == "A" and isinstance(record.get("address"), str):
            self.a[name].append(record["address"])
        elif record.get("type") == "SRV" and isinstance(record.get("port"), int):
            self.srv[name].append((int(record.get("priority") or 0), int(record.get("weight") or 0),
                                   record["port"], str(record.get("target") or "").lower()))

    def answer(self, request: DNSRecord, name: str) -> DNSRecord:
        """The authoritative reply to `request`, whose (single) question is `name` (lower case)."""
        reply = request.reply()  # qr aa ra, the question echoed as asked (case included)
        reply.header.rd = request.header.rd
        qname, qtype = request.q.qname, request.q.qtype
        if qtype in (QTYPE.A, QTYPE.ANY):
            for address in self.a.get(name, ()):
                reply.add_answer(RR(qname, QTYPE.A, ttl=self.ttl, rdata=A(address)))
        if qtype in (QTYPE.SRV, QTYPE.ANY):
            for priority, weight, port, target in self.srv.get(name, ()):
                rdata = SRV(priority, weight, port, target)
                reply.add_answer(RR(qname, QTYPE.SRV, ttl=self.ttl, rdata=rdata))
                for address in self.a.get(target, ()):
                    reply.add_ar(RR(target, QTYPE.A, ttl=self.ttl, rdata=A(address)))
        if not reply.rr:
            if name not in self.nodes:
                reply.header.rcode = RCODE.NXDOMAIN
            reply.add_auth(self.soa)
        if any(rr.rtype == QTYPE.OPT for rr in request.ar):
            reply.add_ar(EDNS0(udp_len=1232))
        return reply


def zone_from_slice(docs: Iterable[Any]) -> Zone:
    """The zone of the slice's `derived/dns` documents (anything not a document is skipped)."""
    return Zone(doc for doc in docs if isinstance(doc, Mapping))
