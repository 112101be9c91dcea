"""The node-local resolver's sockets: UDP and TCP on one address (the bridge's gateway, port 53).

One thread reads UDP queries and answers the cluster's names inline from `Answers` (cached wire
answers: no thread hand-off on the hot path). Other names go to a small pool that asks the host's
resolvers (`Upstreams`) and sends their reply, or SERVFAIL when none answered within the timeout;
when too many are in flight a query gets SERVFAIL at once. TCP connections (clients retry there
after a truncated answer) get a thread each, a bounded number, with an idle timeout. Nothing a
client sends can end a thread: a failure is logged and the next packet read.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ccattler.agent.dns.answers import Answers, Forward, servfail
from ccattler.agent.dns.upstream import Upstreams, read_framed
from ccattler.agent.dns.zone import Zone
from ccattler.engine.facts import CcaError

log = logging.getLogger(__name__)

#: Forwarded queries in flight at most (beyond: SERVFAIL at once); TCP connections at most.
MAX_FORWARDS = 128
MAX_TCP = 32
#: Seconds a TCP connection may sit idle between queries.
TCP_IDLE = 5.0


class ResolverError(CcaError):
    """The resolver could not listen on its address (port taken, address not on this host)."""


class Resolver:
    """Serves the cluster zone on `address`:`port` (UDP and TCP) until `stop()`."""

    def __init__(self, address: str, port: int = 53, upstreams: Upstreams | None = None,
                 answers: Answers | None = None) -> None:
        self.address = address
        self.answers = answers or Answers()
        self.upstreams = upstreams or Upstreams(exclude=(address,))
        self._stopping = threading.Event()
        self._forwarding = threading.BoundedSemaphore(MAX_FORWARDS)
        self._tcp_slots = threading.BoundedSemaphore(MAX_TCP)
        try:
            # no SO_REUSEADDR on UDP: on Linux it would let a second resolver share the port silently
            self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._udp.bind((address, port))
            self.port = self._udp.getsockname()[1]  # port 0: the one the kernel picked (tests)
            self._tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart past TIME_WAIT
            self._tcp.bind((address, self.port))
            self._tcp.listen(64)
        except OSError as exc:
            self._close_sockets()
            raise ResolverError(f"DNS resolver cannot listen on {address}:{port}: {exc}") from None
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="cca-dns-forward")
        self._threads = [threading.Thread(target=self._serve_udp, name="cca-dns-udp", daemon=True),
                         threading.Thread(target=self._serve_tcp, name="cca-dns-tcp", daemon=True)]
        for thread in self._threads:
            thread.start()

    def update(self, docs: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> None:
        """Serve the zone of these `derived/dns` documents (key → document, or a list) from now on."""
        self.answers.set_zone(Zone(docs))

    def change(self, changes: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Replace (None: remove) these documents, keyed as given to `update` as a mapping."""
        self.answers.set_zone(self.answers.zone.updated(changes))

    def stop(self) -> None:
        self._stopping.set()
        for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
            try:  # wake the blocked reader: it sees the flag and returns
                with socket.socket(socket.AF_INET, kind) as poke:
                    poke.settimeout(0.5)
                    poke.connect((self.address, self.port))
                    poke.send(b"")
            except OSError:
                pass
        for thread in self._threads:
            thread.join(timeout=2.0)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._close_sockets()

    def _close_sockets(self) -> None:
        for sock in (getattr(self, "_udp", None), getattr(self, "_tcp", None)):
            if sock is not None:
                sock.close()

    # -- UDP -----------------------------------------------------------------------------------
    def _serve_udp(self) -> None:
        sock, answer = self._udp, self.answers.answer
        while not self._stopping.is_set():
            try:
                packet, client = sock.recvfrom(65535)
            except OSError:
                if self._stopping.is_set():
                    return
                continue  # e.g. an ICMP error of an earlier send reported here
            try:
                reply = answer(packet)
                if isinstance(reply, Forward):
                    self._forward_udp(packet, reply, client)
                elif reply is not None:
                    sock.sendto(reply, client)
            except Exception:  # noqa: BLE001 (one bad packet must never end the resolver)
                log.exception("DNS: answering %d bytes from %s", len(packet), client)

    def _forward_udp(self, packet: bytes, forward: Forward, client: Any) -> None:
        if not self._forwarding.acquire(blocking=False):
            self._udp.sendto(servfail(forward.request), client)
            return

        def job() -> None:
            try:
                reply = self.upstreams.query(packet)
                self._udp.sendto(reply if reply is not None else servfail(forward.request), client)
            except OSError:
                pass  # the client or our socket went away
            finally:
                self._forwarding.release()

        try:
            self._pool.submit(job)
        except RuntimeError:  # shutting down
            self._forwarding.release()

    # -- TCP -----------------------------------------------------------------------------------
    def _serve_tcp(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._tcp.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                continue
            if self._stopping.is_set() or not self._tcp_slots.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=self._serve_connection, args=(conn,), name="cca-dns-tcp-conn",
                             daemon=True).start()

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(TCP_IDLE)
            while not self._stopping.is_set():
                packet = read_framed(conn)
                if packet is None:
                    return
                reply = self.answers.answer(packet, tcp=True)
                if isinstance(reply, Forward):
                    forwarded = self.upstreams.query(packet, tcp=True)
                    reply = forwarded if forwarded is not None else servfail(reply.request)
                if reply is None:
                    return
                conn.sendall(struct.pack("!H", len(reply)) + reply)
        except OSError:
            pass  # idle timeout, reset, or shutting down
        except Exception:  # noqa: BLE001
            log.exception("DNS: a TCP query")
        finally:
            conn.close()
            self._tcp_slots.release()
