"""Byte layouts of the data plane's maps, one codec per struct of bpf/maps.h (the test compiles
that header and checks sizes and offsets against these). Addresses and VIP ports are in network
byte order as the programs see them; the policy port is in host order (the program converts it).
"""

from __future__ import annotations

import ipaddress
import socket
import struct

PROTO_NUMBERS = {"tcp": 6, "udp": 17, "icmp": 1, "any": 0}
PROTO_NAMES = {v: k for k, v in PROTO_NUMBERS.items()}
HOST_IDENTITY = 1

# name → (struct format, field names); "=" = native order, no padding: the C structs are packed by
# hand (explicit pad fields), so native alignment gives the same bytes.
LAYOUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "svc_key": ("=4sHBB", ("vip", "port", "proto", "pad")),
    "svc_val": ("=IIQ", ("id", "count", "hits")),
    "backend_key": ("=II", ("id", "slot")),
    "backend_val": ("=4sHH", ("addr", "port", "pad")),
    "revnat_val": ("=4s4sHHI", ("vip", "backend", "vport", "bport", "pad")),
    "flow_key": ("=QIHH", ("cookie", "addr", "port", "pad")),
    "ipcache_val": ("=I", ("identity",)),
    "policy_key": ("=IIHBB", ("dst_id", "src_id", "port", "proto", "pad")),
    "policy_val": ("=Q", ("hits",)),
    "policed_val": ("=Q", ("drops",)),
}


def _ip(addr: str) -> bytes:
    return ipaddress.IPv4Address(addr).packed


def _addr(raw: bytes) -> str:
    return str(ipaddress.IPv4Address(raw))


def _nport(port: int) -> int:
    """A port as the u16 the kernel stores it (network order, read back natively)."""
    return struct.unpack("=H", struct.pack("!H", port))[0]


def svc_key(vip: str, port: int, proto: str) -> bytes:
    return struct.pack("=4sHBB", _ip(vip), _nport(port), PROTO_NUMBERS[proto], 0)


def parse_svc_key(raw: bytes) -> tuple[str, int, str]:
    vip, port, proto, _ = struct.unpack("=4sHBB", raw)
    return _addr(vip), socket.ntohs(port), PROTO_NAMES.get(proto, str(proto))


def svc_val(service_id: int, count: int, hits: int = 0) -> bytes:
    return struct.pack("=IIQ", service_id, count, hits)


def parse_svc_val(raw: bytes) -> tuple[int, int, int]:
    return struct.unpack("=IIQ", raw)


def backend_key(service_id: int, slot: int) -> bytes:
    return struct.pack("=II", service_id, slot)


def parse_backend_key(raw: bytes) -> tuple[int, int]:
    return struct.unpack("=II", raw)


def backend_val(ip: str, port: int) -> bytes:
    return struct.pack("=4sHH", _ip(ip), _nport(port), 0)


def parse_backend_val(raw: bytes) -> tuple[str, int]:
    addr, port, _ = struct.unpack("=4sHH", raw)
    return _addr(addr), socket.ntohs(port)


def ip_key(ip: str) -> bytes:
    return _ip(ip)


def parse_ip_key(raw: bytes) -> str:
    return _addr(raw)


def ipcache_val(identity: int) -> bytes:
    return struct.pack("=I", identity)


def parse_ipcache_val(raw: bytes) -> int:
    return struct.unpack("=I", raw)[0]


def identity_key(identity: int) -> bytes:
    return struct.pack("=I", identity)


def parse_identity_key(raw: bytes) -> int:
    return struct.unpack("=I", raw)[0]


def policy_key(dst_id: int, src_id: int, port: int, proto: str) -> bytes:
    return struct.pack("=IIHBB", dst_id, src_id, port, PROTO_NUMBERS[proto], 0)


def parse_policy_key(raw: bytes) -> tuple[int, int, int, str]:
    dst, src, port, proto, _ = struct.unpack("=IIHBB", raw)
    return dst, src, port, PROTO_NAMES.get(proto, str(proto))


def counter(value: int = 0) -> bytes:
    return struct.pack("=Q", value)


def parse_counter(raw: bytes) -> int:
    return struct.unpack("=Q", raw)[0]
