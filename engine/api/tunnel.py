"""The server end of the agent tunnels: each agent keeps one `Agent.Tunnel` stream open, and the
server opens logs and exec sessions down it (the reverse of the API server dialing a kubelet).

Agent-initiated, so a node needs no listening port, no server certificate and no reachable address
(NAT, firewalls), and the node's own mTLS identity authenticates the tunnel. Opened on demand: a
session for a node without a tunnel summons it (a `tunnel` event down the node's slice watch) and
waits up to `SUMMON_TIMEOUT`; the agent closes it again once idle. A thousand idle nodes so hold no
tunnel streams. An open tunnel is a coroutine on the API server's event loop (engine/api/aio_server.py),
no thread; sessions are opened and fed from the blocking Cluster calls' threads (`_Down` hands their
messages to the loop). Sessions are multiplexed by id: `TunnelDown` opens/feeds/cancels one,
`TunnelUp` carries its output and end.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.facts import CcaError

log = logging.getLogger("ccattler.api")

#: How long opening a session waits for a summoned node to open its tunnel.
SUMMON_TIMEOUT = 10.0


class Session:
    """One logs or exec session on one node; its output arrives on `output` (`TunnelUp`s)."""

    def __init__(self, ident: int, tunnel: _NodeTunnel, output: queue.Queue[Any], label: str) -> None:
        self.id, self.label, self.output = ident, label, output
        self._tunnel = tunnel

    def send(self, stdin: bytes = b"", closed: bool = False) -> None:
        self._tunnel.down.put(api_pb2.TunnelDown(session=self.id, stdin=stdin, stdin_closed=closed))

    def resize(self, rows: int, cols: int) -> None:
        """An exec session's terminal changed size."""
        size = api_pb2.WindowSize(rows=rows, cols=cols)
        self._tunnel.down.put(api_pb2.TunnelDown(session=self.id, resize=size))

    def cancel(self) -> None:
        """End the session on the node (kills an exec, stops a follow); safe to call twice."""
        if self._tunnel.sessions.pop(self.id, None) is not None:
            self._tunnel.down.put(api_pb2.TunnelDown(session=self.id, cancel=True))


class _Down:
    """What the server sends down one tunnel: put from any thread, read by the tunnel's coroutine
    (None ends the tunnel)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._items: deque[api_pb2.TunnelDown | None] = deque()
        self._lock = threading.Lock()
        self._loop = loop
        self._ready = asyncio.Event()

    def put(self, message: api_pb2.TunnelDown | None) -> None:
        with self._lock:
            self._items.append(message)
        try:
            self._loop.call_soon_threadsafe(self._ready.set)
        except RuntimeError:  # the loop closed (server stopped): nobody reads any more
            pass

    async def get(self) -> api_pb2.TunnelDown | None:
        while True:
            with self._lock:
                if self._items:
                    return self._items.popleft()
            self._ready.clear()  # a put from now on sets it after this (its callback runs on the loop)
            await self._ready.wait()


class _NodeTunnel:
    def __init__(self, node: str, down: _Down) -> None:
        self.node = node
        self.down = down
        self.sessions: dict[int, Session] = {}

    def end_all(self, error: str) -> None:
        for session in list(self.sessions.values()):
            session.output.put((session, api_pb2.TunnelUp(session=session.id, closed=True, error=error)))
        self.sessions.clear()


class TunnelHub:
    """Every connected node's tunnel, by node name."""

    def __init__(self, summon: Callable[[str], None] | None = None) -> None:
        self._tunnels: dict[str, _NodeTunnel] = {}
        self._lock = threading.Lock()
        self._opened = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        self.summon = summon  # asks a node's agent to open its tunnel

    def connected(self, node: str) -> bool:
        return node in self._tunnels

    async def serve(self, node: str, ups: AsyncIterator[api_pb2.TunnelUp]
                    ) -> AsyncIterator[api_pb2.TunnelDown]:
        """Run `node`'s tunnel: route its output to sessions, yield what the server sends it."""
        tunnel = _NodeTunnel(node, _Down(asyncio.get_running_loop()))
        with self._lock:
            previous, self._tunnels[node] = self._tunnels.get(node), tunnel
            self._opened.notify_all()
        if previous is not None:  # a reconnecting agent: its old stream is dead to us
            previous.end_all(f"node {node} reconnected its tunnel")
            previous.down.put(None)

        async def read() -> None:
            try:
                async for up in ups:
                    session = tunnel.sessions.get(up.session)
                    if session is not None:
                        if up.closed:
                            tunnel.sessions.pop(up.session, None)
                        session.output.put((session, up))
            except Exception as exc:  # the stream broke: the sessions end with that reason
                log.info("tunnel of node %s ended: %s", node, exc)
            finally:
                with self._lock:
                    if self._tunnels.get(node) is tunnel:
                        del self._tunnels[node]
                tunnel.end_all(f"node {node} disconnected")
                tunnel.down.put(None)

        reader = asyncio.create_task(read())
        try:
            while (message := await tunnel.down.get()) is not None:
                yield message
        finally:
            reader.cancel()

    def open(self, node: str, kind: str, request: dict[str, Any], label: str,
             output: queue.Queue[Any] | None = None) -> Session:
        """Open a `kind` session on `node`; its output goes to `output` as (session, TunnelUp)."""
        tunnel = self._tunnels.get(node)
        if tunnel is None and self.summon is not None:
            self.summon(node)
            with self._lock:
                self._opened.wait_for(lambda: node in self._tunnels, SUMMON_TIMEOUT)
                tunnel = self._tunnels.get(node)
        if tunnel is None:
            raise CcaError(f"node {node} has no tunnel to the API server (is its agent running and "
                           "up to date?)")
        session = Session(next(self._ids), tunnel, output or queue.Queue(), label)
        tunnel.sessions[session.id] = session
        tunnel.down.put(api_pb2.TunnelDown(session=session.id, open=kind, request_json=json.dumps(request)))
        return session
