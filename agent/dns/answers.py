"""Query bytes → reply bytes for the cluster zone, with a cache of wire answers on the hot path.

The cache key is the query without its 2-byte ID (flags, question as asked — case included — and
any EDNS record), the value the packed reply without its ID: a hit is one dict lookup and a
concatenation, no parsing (the issue measured 45 µs p50 for such a loop against 424 µs for
dnslib's threaded server). A new zone comes with a new, empty cache, swapped in as one object, so
no answer of the old zone survives it. Names outside the zone come back as `Forward`; packets that
are not queries are dropped (None) or answered FORMERR / NOTIMP, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass

from dnslib import OPCODE, QTYPE, RCODE, DNSError, DNSHeader, DNSRecord

from ccattler.agent.dns.zone import Zone, in_zone

#: Cached answers at most per transport; the cache starts over when full (names asked are few).
CACHE_SIZE = 4096
#: The largest UDP reply without EDNS (RFC 1035); bigger ones go out truncated (TC: ask over TCP).
UDP_LIMIT = 512


@dataclass(frozen=True, slots=True)
class Forward:
    """A query for a name outside the zone: send it to the host's resolvers."""

    request: DNSRecord


@dataclass(slots=True)
class _Served:
    zone: Zone
    udp: dict[bytes, bytes]
    tcp: dict[bytes, bytes]


class Answers:
    """Answers queries from the current zone (`set_zone` replaces it)."""

    def __init__(self, zone: Zone | None = None) -> None:
        self._served = _Served(zone or Zone(), {}, {})

    @property
    def zone(self) -> Zone:
        return self._served.zone

    def set_zone(self, zone: Zone) -> None:
        self._served = _Served(zone, {}, {})

    def answer(self, packet: bytes, tcp: bool = False) -> bytes | Forward | None:
        """The reply to `packet`, `Forward` for a name outside the zone, None to drop it."""
        served = self._served  # one read: a zone swapped meanwhile cannot mix with this answer
        cache = served.tcp if tcp else served.udp
        hit = cache.get(packet[2:])
        if hit is not None:
            return packet[:2] + hit
        if len(packet) < 12 or packet[2] & 0x80:
            return None  # no full header, or a response (never answer those: no loops)
        try:
            request = DNSRecord.parse(packet)
        except (DNSError, ValueError, IndexError, UnicodeError, TypeError, KeyError):
            return _error(packet, RCODE.FORMERR)
        if request.header.opcode != OPCODE.QUERY:
            return _error(packet, RCODE.NOTIMP)
        if len(request.questions) != 1:
            return _error(packet, RCODE.FORMERR)
        name = str(request.q.qname).rstrip(".").lower()
        if not in_zone(name):
            return Forward(request)
        wire = bytes(served.zone.answer(request, name).pack())
        if not tcp and len(wire) > _udp_limit(request):
            reply = request.reply()
            reply.header.tc = 1
            wire = bytes(reply.pack())
        if len(cache) >= CACHE_SIZE:
            cache.clear()
        cache[packet[2:]] = wire[2:]
        return wire


def _udp_limit(request: DNSRecord) -> int:
    sizes = [rr.rclass for rr in request.ar if rr.rtype == QTYPE.OPT]  # an OPT's class is its size
    return max(UDP_LIMIT, min(sizes[0], 1232)) if sizes else UDP_LIMIT


def _error(packet: bytes, rcode: int) -> bytes:
    """A bare reply header with `rcode` and the query's ID (its question may not even parse)."""
    header = DNSHeader(id=int.from_bytes(packet[:2], "big"), qr=1, rcode=rcode)
    header.rd = packet[2] & 1
    return DNSRecord(header).pack()


def servfail(request: DNSRecord) -> bytes:
    """SERVFAIL for a forwarded query no upstream answered."""
    reply = request.reply()
    reply.header.aa = 0
    reply.header.rcode = RCODE.SERVFAIL
    return reply.pack()
