"""Forwarding names outside the cluster zone to the host's resolvers: the `nameserver` lines of
the resolv.conf the agent sees (its node's network namespace shares the host's files), re-read
when the file changes, the resolver's own address left out (no loops). Each query tries the
servers in order within one overall `timeout`; None when none answered in time — the caller
answers SERVFAIL, so a client never waits for its own timeout.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import time
from pathlib import Path

#: Seconds one forwarded query may take over all upstreams together.
FORWARD_TIMEOUT = 2.0


def nameservers(text: str) -> list[str]:
    """The IP addresses of a resolv.conf's `nameserver` lines, in order (bad ones skipped)."""
    servers = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                servers.append(str(ipaddress.ip_address(words[1].split("%")[0])))
            except ValueError:
                continue
    return servers


class Upstreams:
    """The host's resolvers, from `path` (re-read when its mtime changes), minus `exclude`."""

    def __init__(self, path: str | Path = "/etc/resolv.conf", exclude: tuple[str, ...] = (),
                 port: int = 53, timeout: float = FORWARD_TIMEOUT,
                 servers: list[tuple[str, int]] | None = None) -> None:
        self.path, self.exclude, self.port, self.timeout = Path(path), exclude, port, timeout
        self._fixed = servers  # tests and benchmarks: these, not the file's
        self._mtime: float | None = None
        self._servers: list[tuple[str, int]] = []

    def servers(self) -> list[tuple[str, int]]:
        if self._fixed is not None:
            return self._fixed
        try:
            mtime = os.stat(self.path).st_mtime
        except OSError:
            return []
        if mtime != self._mtime:
            try:
                text = self.path.read_text()
            except OSError:
                return []
            self._servers = [(ip, self.port) for ip in nameservers(text) if ip not in self.exclude]
            self._mtime = mtime
        return self._servers

    def query(self, packet: bytes, tcp: bool = False) -> bytes | None:
        """The first upstream's reply to `packet` (its ID checked), or None within the timeout."""
        deadline = time.monotonic() + self.timeout
        servers = self.servers()
        for index, server in enumerate(servers):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            # an even share of what is left, so a dead first server leaves time for the others
            share = left / (len(servers) - index)
            try:
                reply = (_tcp if tcp else _udp)(server, packet, share)
            except OSError:
                continue
            if reply is not None and reply[:2] == packet[:2]:
                return reply
        return None


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _udp(server: tuple[str, int], packet: bytes, timeout: float) -> bytes | None:
    with socket.socket(_family(server[0]), socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.connect(server)  # a random source port; replies from elsewhere are not delivered
        sock.send(packet)
        return sock.recv(65535)


def _tcp(server: tuple[str, int], packet: bytes, timeout: float) -> bytes | None:
    with socket.create_connection(server, timeout=timeout) as sock:
        sock.sendall(struct.pack("!H", len(packet)) + packet)
        return read_framed(sock)


def read_framed(sock: socket.socket) -> bytes | None:
    """One length-prefixed DNS message from a TCP stream; None at end of stream."""
    head = _read_exactly(sock, 2)
    if head is None:
        return None
    return _read_exactly(sock, struct.unpack("!H", head)[0])


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data
