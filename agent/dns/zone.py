"""The cluster zone as the resolver serves it: the `derived/dns/<tenant>/<service>` documents of
the node's slice folded into name → records (engine/controllers/dns.py writes them).

`answer(request)` builds the reply to one parsed query for a name inside `cca.local` with dnslib:
A and SRV from the records (SRV with its targets' addresses as additional records), ANY both,
every other type an empty NOERROR; a name that only has names below it (`default.cca.local`) an
empty NOERROR too, an unknown one NXDOMAIN — both with the zone's SOA so clients cache the
negative answer for the TTL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dnslib import EDNS0, QTYPE, RCODE, RR, SOA, SRV, A, DNSRecord

ZONE = "cca.local"
DEFAULT_TTL = 5


def in_zone(name: str) -> bool:
    """`name` (lower case, no trailing dot) is the cluster zone or below it."""
    return name == ZONE or name.endswith("." + ZONE)


#: One record: (name, "A", address) or (name, "SRV", (priority, weight, port, target)).
Record = tuple[str, str, Any]


def records_of(doc: Mapping[str, Any]) -> tuple[Record, ...]:
    """A `derived/dns` document's records, names in lower case; malformed ones skipped."""
    out: list[Record] = []
    for record in doc.get("records") or []:
        if not isinstance(record, Mapping) or not isinstance(record.get("name"), str):
            continue
        name = record["name"].lower().rstrip(".")
        if not in_zone(name):
            continue
        if record.get("type") == "A" and isinstance(record.get("address"), str):
            out.append((name, "A", record["address"]))
        elif record.get("type") == "SRV" and isinstance(record.get("port"), int):
            out.append((name, "SRV", (int(record.get("priority") or 0), int(record.get("weight") or 0),
                                      record["port"], str(record.get("target") or "").lower())))
    return tuple(out)


def _suffixes(name: str) -> list[str]:
    """`a.b.cca.local` → itself, `b.cca.local`, `cca.local`."""
    labels = name.split(".")
    return [".".join(labels[i:]) for i in range(len(labels) - 1)]


class Zone:
    """name → its A addresses and SRV records, and every name that exists (with records of its own
    or only below it), from `derived/dns` documents (a list, or a mapping key → document).

    A zone is never changed once served: `updated(changes)` makes the next one from this one — the
    tables are copied at C speed and only the changed documents' records are redone (a change
    costs milliseconds at 10,000 services; building the whole zone ~80 ms)."""

    def __init__(self, docs: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
                 ttl: int = DEFAULT_TTL) -> None:
        self.ttl = ttl
        self.a: dict[str, tuple[str, ...]] = {}
        self.srv: dict[str, tuple[tuple[int, int, int, str], ...]] = {}
        self.nodes: dict[str, int] = {ZONE: 1}  # name → records at or below it (the apex always)
        self._by_doc: dict[Any, tuple[Record, ...]] = {}
        for key, doc in (docs.items() if isinstance(docs, Mapping) else enumerate(docs)):
            if isinstance(doc, Mapping):
                self._put(key, doc)
        self._make_soa()

    def updated(self, changes: Mapping[str, Mapping[str, Any] | None]) -> Zone:
        """The zone with these documents replaced (None: removed); keys as given to the mapping form."""
        new = Zone.__new__(Zone)
        new.ttl = self.ttl
        new.a, new.srv, new.nodes = dict(self.a), dict(self.srv), dict(self.nodes)
        new._by_doc = dict(self._by_doc)
        for key, doc in changes.items():
            new._drop(key)
            if isinstance(doc, Mapping):
                new._put(key, doc)
        new._make_soa()
        return new

    def _put(self, key: Any, doc: Mapping[str, Any]) -> None:
        if isinstance(doc.get("ttl"), int):
            self.ttl = doc["ttl"]
        records = records_of(doc)
        self._by_doc[key] = records
        for name, kind, value in records:
            table = self.a if kind == "A" else self.srv
            table[name] = (*table.get(name, ()), value)
            for suffix in _suffixes(name):
                self.nodes[suffix] = self.nodes.get(suffix, 0) + 1

    def _drop(self, key: Any) -> None:
        for name, kind, value in self._by_doc.pop(key, ()):
            table = self.a if kind == "A" else self.srv
            left = list(table.get(name, ()))
            if value in left:
                left.remove(value)
            if left:
                table[name] = tuple(left)
            else:
                table.pop(name, None)
            for suffix in _suffixes(name):
                count = self.nodes.get(suffix, 0) - 1
                if count > 0 or suffix == ZONE:
                    self.nodes[suffix] = max(count, 1) if suffix == ZONE else count
                else:
                    self.nodes.pop(suffix, None)

    def _make_soa(self) -> None:
        self.soa = RR(ZONE, QTYPE.SOA, ttl=self.ttl,
                      rdata=SOA(f"ns.{ZONE}", f"hostmaster.{ZONE}", (1, 3600, 600, 86400, self.ttl)))

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

