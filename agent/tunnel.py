"""The node end of the agent tunnel (`Agent.Tunnel`, engine/api/tunnel.py): keeps one stream to the
API server open and serves the logs, exec and inspect sessions the server opens down it, from this node's
runtime (and, for inspect with `dataplane`, its data plane read back from the kernel). Started by
`AgentLoop.run`; reconnects after `retry` seconds when the stream breaks.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ccattler.agent.debug import node_report
from ccattler.agent.runtime.base import ContainerError, Runtime
from ccattler.agent.runtime.logindex import read_since
from ccattler.agent.runtime.terminal import MAX_CELLS, set_window_size
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.facts import CcaError

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
Send = Callable[[api_pb2.TunnelUp], None]


class _Session:
    """One session on this node: a cancel flag, and for exec the process, its stdin queue and (with
    a terminal) its window size."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None
        self.stdin: queue.Queue[bytes | None] = queue.Queue()
        self.size: tuple[int, int] | None = None
        self._terminal: int | None = None  # our own descriptor of an exec's pty master, for resizes
        self._lock = threading.Lock()  # resizes arrive on the tunnel's thread, the process starts on ours

    def initial_size(self, requested: tuple[int, int] | None) -> tuple[int, int] | None:
        """The size to start with: a resize that came before the start wins over the request's."""
        with self._lock:
            return self.size or requested

    def started(self, process: subprocess.Popen[bytes], tty: bool, size: tuple[int, int] | None) -> None:
        with self._lock:
            self.process = process
            if tty:  # a duplicate: stdin closes at end of input, stdout once drained; resizes go on
                assert process.stdout is not None
                self._terminal = os.dup(process.stdout.fileno())
                if self.size is not None and self.size != size:  # it changed while the process started
                    self._apply()

    def finished(self) -> None:
        with self._lock:
            if self._terminal is not None:
                os.close(self._terminal)
                self._terminal = None

    def resize(self, rows: int, cols: int) -> None:
        with self._lock:
            self.size = (rows, cols)
            if self._terminal is not None:
                self._apply()

    def _apply(self) -> None:
        assert self._terminal is not None and self.size is not None
        try:
            set_window_size(self._terminal, *self.size)
        except (OSError, ValueError) as exc:  # a size no terminal has
            log.debug("exec resize to %s: %s", self.size, exc)

    def cancel(self) -> None:
        self.cancelled.set()
        self.stdin.put(None)
        if self.process is not None and self.process.poll() is None:
            self.process.kill()


class AgentTunnel:
    """Serves logs and exec for `runtime` over `client` (an `AgentClient`: `client.tunnel(ups)` opens
    the stream). `start(stop)` runs it in a thread; `close()` ends the stream and every session.

    With `linger` (seconds) the tunnel is one the server summoned: it closes once it has had no
    session for that long, and is not reopened until the server asks again."""

    def __init__(self, client: Any, runtime: Runtime, *, retry: float = 1.0, poll: float = 0.2,
                 linger: float | None = None, dataplane: Callable[[], dict[str, Any]] | None = None) -> None:
        self.client, self.runtime, self.retry, self.poll = client, runtime, retry, poll
        self.dataplane = dataplane  # NodeCore.inspect_dataplane: the kernel's state, read on request
        self.linger = linger
        self._call: Any = None
        self._sessions: dict[int, _Session] = {}
        self._closed = threading.Event()
        self._active_at = time.monotonic()
        self._thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._closed.is_set()

    def start(self, stop: threading.Event) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="cca-tunnel", daemon=True)
        self._thread.start()
        if self.linger is not None:
            threading.Thread(target=self._close_when_idle, args=(stop,), name="cca-tunnel-idle",
                             daemon=True).start()
        return self._thread

    def _close_when_idle(self, stop: threading.Event) -> None:
        while not stop.wait(1.0) and not self._closed.is_set():
            if self._sessions:
                self._active_at = time.monotonic()
            elif time.monotonic() - self._active_at > self.linger:
                self.close()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set() and not self._closed.is_set():
            ups: queue.Queue[api_pb2.TunnelUp | None] = queue.Queue()
            try:
                self._call = self.client.tunnel(_drain(ups))
                for down in self._call:
                    self._dispatch(down, ups.put)
            except Exception as exc:  # a broken stream (grpc.RpcError): reconnect
                if not self._closed.is_set():
                    log.warning("tunnel to the API server broke: %s", exc)
            finally:
                ups.put(None)
                self._end_sessions()
            if self.linger is not None:  # summoned: the server asks again when it needs us
                self._closed.set()
            stop.wait(self.retry)

    def close(self) -> None:
        self._closed.set()
        if self._call is not None:
            self._call.cancel()
        self._end_sessions()

    def _end_sessions(self) -> None:
        for session in list(self._sessions.values()):
            session.cancel()
        self._sessions.clear()

    def _dispatch(self, down: api_pb2.TunnelDown, send: Send) -> None:
        self._active_at = time.monotonic()
        if down.open:
            session = self._sessions[down.session] = _Session()
            serve = {"logs": self._logs, "exec": self._exec, "inspect": self._inspect}.get(down.open)
            target = self._guard(serve, down.session, session, json.loads(down.request_json or "{}"), send)
            threading.Thread(target=target, name=f"cca-{down.open}-{down.session}", daemon=True).start()
            return
        session = self._sessions.get(down.session)
        if session is None:
            return
        if down.cancel:
            self._sessions.pop(down.session, None)
            session.cancel()
            return
        if down.HasField("resize"):
            session.resize(down.resize.rows, down.resize.cols)
        if down.stdin:
            session.stdin.put(down.stdin)
        if down.stdin_closed:
            session.stdin.put(None)

    def _guard(self, serve: Callable[..., int | None] | None, sid: int, session: _Session,
               request: dict[str, Any], send: Send) -> Callable[[], None]:
        """The session body: its result (an exit code) or its error closes the session."""

        def body() -> None:
            try:
                if serve is None:
                    raise CcaError("unknown session kind (agent and server versions differ?)")
                code = serve(session, request, lambda fd, data: send(api_pb2.TunnelUp(
                    session=sid, fd=fd, data=data)))
                send(api_pb2.TunnelUp(session=sid, closed=True, exit_code=code or 0))
            except (CcaError, OSError, ValueError, KeyError) as exc:
                send(api_pb2.TunnelUp(session=sid, closed=True, error=str(exc)))
            finally:
                self._sessions.pop(sid, None)

        return body

    def _logs(self, session: _Session, request: dict[str, Any], out: Callable[[int, bytes], None]) -> None:
        instance = str(request["instance"])
        runtime = self.runtime
        path = runtime.init_log_path(instance) if request.get("init") else runtime.log_path(instance)
        data, offset = read_since(path, _since(request))
        tail = int(request.get("tail") or 0)
        if tail > 0:
            data = b"".join(data.splitlines(keepends=True)[-tail:])
        for start in range(0, len(data), CHUNK):
            out(1, data[start:start + CHUNK])
        if not request.get("follow"):
            return None
        while not session.cancelled.wait(self.poll):
            try:
                size = path.stat().st_size
            except FileNotFoundError:  # the container is gone
                return None
            if size < offset:  # rotated (copy-truncate): the new file starts over
                offset = 0
            if size > offset:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read(size - offset)
                offset += len(data)
                out(1, data)
        return None

    def _inspect(self, session: _Session, request: dict[str, Any], out: Callable[[int, bytes], None]) -> None:
        found = node_report(self.runtime)
        if request.get("dataplane"):
            if self.dataplane is None:
                raise CcaError("this agent has no data plane to inspect")
            found["dataplane"] = self.dataplane()
        data = json.dumps(found).encode()
        for start in range(0, len(data), CHUNK):
            out(1, data[start:start + CHUNK])

    def _exec(self, session: _Session, request: dict[str, Any], out: Callable[[int, bytes], None]) -> int:
        name, argv = str(request["instance"]), [str(a) for a in request["command"]]
        if self.runtime.status(name) is None:
            raise ContainerError(f"instance {name} does not run on this node")
        tty, size = bool(request.get("tty")), _size(request.get("size"))
        size = session.initial_size(size)
        process = self.runtime.exec_process(name, argv, tty, size if tty else None)
        session.started(process, tty, size)
        try:
            if session.cancelled.is_set():
                process.kill()
            assert process.stdin and process.stdout and process.stderr
            pumps = [threading.Thread(target=_pump, args=(stream, fd, out), daemon=True)
                     for stream, fd in ((process.stdout, 1), (process.stderr, 2))]
            pumps.append(threading.Thread(target=_feed, args=(session.stdin, process.stdin), daemon=True))
            for pump in pumps:
                pump.start()
            for pump in pumps[:2]:
                pump.join()
            code = process.wait()
        finally:
            session.finished()
        session.stdin.put(None)
        return code if code >= 0 else 128 - code  # killed by a signal: the shell's convention


def _drain(ups: queue.Queue[api_pb2.TunnelUp | None]) -> Iterator[api_pb2.TunnelUp]:
    while (item := ups.get()) is not None:
        yield item


def _size(value: Any) -> tuple[int, int] | None:
    """An exec request's starting terminal size ([rows, columns]); None when absent or no size."""
    if not value:
        return None
    try:
        rows, cols = (int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"malformed terminal size {value!r} (expected [rows, columns])") from None
    if not (0 < rows <= MAX_CELLS and 0 < cols <= MAX_CELLS):
        return None  # a client without a real window (0×0): the pty keeps its default
    return rows, cols


def _since(request: dict[str, Any]) -> float | None:
    """The unix time a logs request starts at: `since_time`, or `since_seconds` before now (this
    node's clock, so a duration does not depend on the client's)."""
    if request.get("since_time"):
        return float(request["since_time"])
    if request.get("since_seconds"):
        return time.time() - float(request["since_seconds"])
    return None


def _pump(stream: Any, fd: int, out: Callable[[int, bytes], None]) -> None:
    try:
        while data := os.read(stream.fileno(), CHUNK):
            out(fd, data)
    except OSError:  # a pty's master reads EIO once the command has exited
        pass
    stream.close()


def _feed(stdin: queue.Queue[bytes | None], pipe: Any) -> None:
    try:
        while (data := stdin.get()) is not None:
            pipe.write(data)
            pipe.flush()
    except (BrokenPipeError, ValueError):  # the command exited or closed its input
        pass
    finally:
        try:
            pipe.close()
        except (BrokenPipeError, ValueError):
            pass
