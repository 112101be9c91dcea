"""The mutual-TLS listener on `grpc.aio`: streams as coroutines, blocking calls in a thread pool.

The sync gRPC server holds a thread per open stream, and every node keeps its slice watch open: at
1,000 nodes that was ~2,000 threads fighting the runner for the GIL (docs/benchmarks.md). Here one
event loop (its own thread) serves every call. A servicer method written as a coroutine (an async
generator: `AgentService.WatchSlice`, `Heartbeat`) runs on the loop and costs no thread while
idle; every other method keeps its blocking implementation and the sync path's plumbing
(`calls._unary` / `calls._streaming`: authentication, limits, audit, status mapping) and runs in a
pool only while it works — a unary call for its duration, a server stream per message.
`ThreadContext` gives those handlers what they read of a sync `ServicerContext` (peer, auth
context, metadata, `is_active`, `abort`). Knobs: `pool_size`, the blocking streams served at
once, and `call_threads`, the short blocking calls (more wait for a thread).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc

from ccattler.engine.api.calls import _DENIED, Plumbing, _Handling, _parse, _serializer, _streaming, _unary
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.facts import CcaError

log = logging.getLogger("ccattler.api")

_END = object()
#: How often the loop checks its own lag, and how late a check may run before the lag counts as a
#: stall (keepalives queued unread): then `on_lag(seconds late)` is called.
LAG_TICK = 0.5
LAG_GRACE = 1.0


class _Abort(Exception):
    """`ThreadContext.abort` in a pool thread; the loop ends the call with this status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class ThreadContext:
    """The sync `ServicerContext` surface our blocking handlers use, for a call served by the loop."""

    def __init__(self, context: grpc.aio.ServicerContext, loop: asyncio.AbstractEventLoop) -> None:
        self._context, self._loop = context, loop
        self._peer = context.peer()
        self._auth = context.auth_context()
        self._metadata = context.invocation_metadata()
        self._ended = threading.Event()
        context.add_done_callback(lambda _: self._ended.set())

    def peer(self) -> str:
        return self._peer

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth

    def invocation_metadata(self) -> Any:
        return self._metadata

    def is_active(self) -> bool:
        return not self._ended.is_set()

    def end(self) -> None:
        self._ended.set()

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise _Abort(code, details)

    def requests(self) -> Iterator[bytes]:
        """A client stream's messages, read from the loop (blocks this pool thread, not the loop)."""
        while True:
            reading = asyncio.run_coroutine_threadsafe(self._context.read(), self._loop)
            while True:  # wake now and then: a call that ended (server stopping) frees the thread
                try:
                    message = reading.result(1.0)
                    break
                except futures.TimeoutError:
                    if self._ended.is_set():
                        reading.cancel()
                        return
            if message is grpc.aio.EOF:
                return
            yield message


def _blocking_unary(behavior: Callable, pool: futures.Executor) -> Callable:
    async def run(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        loop = asyncio.get_running_loop()
        thread_context = ThreadContext(context, loop)
        try:
            return await loop.run_in_executor(pool, behavior, raw, thread_context)
        except _Abort as exc:
            await context.abort(exc.code, exc.details)

    return run


def _blocking_stream(behavior: Callable, pool: futures.Executor, client_streaming: bool) -> Callable:
    async def run(raw: Any, context: grpc.aio.ServicerContext) -> Any:
        loop = asyncio.get_running_loop()
        thread_context = ThreadContext(context, loop)
        replies = behavior(thread_context.requests() if client_streaming else raw, thread_context)
        pending: futures.Future | None = None
        try:
            while True:
                pending = pool.submit(next, replies, _END)
                reply = await asyncio.wrap_future(pending)
                pending = None
                if reply is _END:
                    return
                yield reply
        except _Abort as exc:
            await context.abort(exc.code, exc.details)
        finally:
            thread_context.end()
            # Close the generator in a thread (its finally may write an audit record): once its
            # message in progress is done if cancelled mid-message; a no-op if it had ended.
            try:
                pool.submit(_close_after, pending, replies)
            except RuntimeError:  # the pool shut down (server stopping)
                pass

    return run


def _close_after(pending: futures.Future | None, replies: Any) -> None:
    if pending is not None:
        try:
            pending.result()
        except BaseException:
            pass
    replies.close()


async def _intend(h: _Handling, call: Any, request: Any, pool: futures.Executor) -> Any:
    """`_Handling.intend` off the loop (it writes to the store), and only for an audited call."""
    if h.target(request) is None:
        return None
    return await asyncio.get_running_loop().run_in_executor(pool, h.intend, call, request)


def _audit(h: _Handling, call: Any, context: ThreadContext, request: Any, code: grpc.StatusCode,
           message: str, intent: Any, pool: futures.Executor) -> None:
    """`_Handling.audit` off the loop when it writes a record (an audited call, a denial)."""
    if intent is None and code not in _DENIED and (request is None or h.target(request) is None):
        return
    try:
        pool.submit(h.audit, call, context, request, code, message, intent)
    except RuntimeError:  # the pool shut down (server stopping): log what is lost
        log.warning("audit record of %s (%s) not written: the server is stopping", h.name, code.name)


def _coroutine_stream(h: _Handling, request_cls: type, pool: futures.Executor) -> Callable:
    """A server stream whose servicer method is an async generator: the loop runs it; the same
    authentication, limits, metrics, audit and status mapping as `calls._streaming`."""

    async def run(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        loop = asyncio.get_running_loop()
        thread_context = ThreadContext(context, loop)
        started, call, request, code, message = time.perf_counter(), None, None, grpc.StatusCode.OK, ""
        h.plumbing.metrics.streams.labels(h.name).inc()
        intent = None
        try:
            call = h.begin(thread_context)
            request = _parse(request_cls, raw)
            intent = await _intend(h, call, request, pool)
            async for reply in h.fn(request, call):
                yield reply
        except asyncio.CancelledError:  # the client went away: not an error of ours
            thread_context.end()
            raise
        except Exception as exc:
            code, message = h.fail(exc, call)
        finally:
            h.plumbing.metrics.streams.labels(h.name).dec()
            h.finish(code, started)
            _audit(h, call, thread_context, request, code, message, intent, pool)
        if code != grpc.StatusCode.OK:
            await context.abort(code, message)

    return run


def _coroutine_bidi(h: _Handling, request_cls: type, pool: futures.Executor) -> Callable:
    """A client-and-server stream whose servicer method is an async generator over the parsed
    requests (`AgentService.Heartbeat`); the plumbing of `calls._streaming`."""

    async def run(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        loop = asyncio.get_running_loop()
        thread_context = ThreadContext(context, loop)
        started, call, code, message = time.perf_counter(), None, grpc.StatusCode.OK, ""
        h.plumbing.metrics.streams.labels(h.name).inc()
        first: list[Any] = []
        intents: list[Any] = [None]
        try:
            call = h.begin(thread_context)

            async def parsed() -> Any:
                async for raw in requests:
                    if first:
                        h.limit(call)  # the first message came with the call, limited in begin
                    parsed_message = _parse(request_cls, raw)
                    if not first:
                        first.append(parsed_message)
                        intents[0] = await _intend(h, call, parsed_message, pool)
                    yield parsed_message

            async for reply in h.fn(parsed(), call):
                yield reply
        except asyncio.CancelledError:
            thread_context.end()
            raise
        except Exception as exc:
            code, message = h.fail(exc, call)
        finally:
            h.plumbing.metrics.streams.labels(h.name).dec()
            h.finish(code, started)
            _audit(h, call, thread_context, first[0] if first else None, code, message, intents[0], pool)
        if code != grpc.StatusCode.OK:
            await context.abort(code, message)

    return run


def aio_handler(service: str, servicer: Any, plumbing: Plumbing, public: frozenset[str],
                pools: Pools) -> grpc.GenericRpcHandler:
    """`calls.handler` for the aio listener: coroutine methods on the loop, the rest in a pool —
    unary calls in `pools.calls`, streams in `pools.streams`."""
    methods = {}
    for method in api_pb2.DESCRIPTOR.services_by_name[service].methods:
        request_cls = getattr(api_pb2, method.input_type.name)
        h = _Handling(plumbing, servicer, method.name, method.name in public)
        pool = pools.streams if method.server_streaming else pools.calls
        serialize = _serializer(getattr(api_pb2, method.output_type.name))
        if inspect.isasyncgenfunction(h.fn) and method.client_streaming:
            if not method.server_streaming:
                raise TypeError(f"{service}.{method.name}: a client stream coroutine must stream replies")
            methods[method.name] = grpc.stream_stream_rpc_method_handler(
                _coroutine_bidi(h, request_cls, pools.calls), response_serializer=serialize)
        elif inspect.isasyncgenfunction(h.fn):
            if not method.server_streaming:
                raise TypeError(f"{service}.{method.name}: only streams may be coroutines")
            methods[method.name] = grpc.unary_stream_rpc_method_handler(
                _coroutine_stream(h, request_cls, pools.calls), response_serializer=serialize)
        elif method.client_streaming and method.server_streaming:
            methods[method.name] = grpc.stream_stream_rpc_method_handler(
                _blocking_stream(_streaming(h, request_cls, True), pool, True), response_serializer=serialize)
        elif method.server_streaming:
            methods[method.name] = grpc.unary_stream_rpc_method_handler(
                _blocking_stream(_streaming(h, request_cls, False), pool, False),
                response_serializer=serialize)
        else:
            methods[method.name] = grpc.unary_unary_rpc_method_handler(
                _blocking_unary(_unary(h, request_cls), pool), response_serializer=serialize)
    return grpc.method_handlers_generic_handler(f"ccattler.v1.{service}", methods)


class Pools:
    """The listener's threads: `calls` for short blocking calls (a few suffice: they contend for one
    GIL and one store writer), `streams` for blocking streams that wait between messages (a CLI
    watch, a logs follow, an exec, a node's tunnel). Threads start when first needed."""

    def __init__(self, calls: int, streams: int) -> None:
        self.calls = futures.ThreadPoolExecutor(calls, thread_name_prefix="cca-api-call")
        self.streams = futures.ThreadPoolExecutor(streams, thread_name_prefix="cca-api-stream")

    def shutdown(self) -> None:
        for pool in (self.calls, self.streams):
            pool.shutdown(wait=False, cancel_futures=True)


async def watch_lag(on_lag: Callable[[float], Any], tick: float = LAG_TICK, grace: float = LAG_GRACE) -> None:
    """Forever: sleep `tick`, and when the wake-up came more than `grace` late the loop was too busy
    to read anything — heartbeats included — for that long: `on_lag(lateness)` (the store pardons
    its leases that much, engine/store/sqlite_leases.py), so a burst of a thousand connecting nodes
    does not expire the leases of the nodes it kept waiting."""
    loop = asyncio.get_running_loop()
    while True:
        planned = loop.time() + tick
        await asyncio.sleep(tick)
        late = loop.time() - planned
        if late > grace:
            try:
                moved = on_lag(late)
            except Exception:  # the store is closing: nothing to pardon
                log.debug("lag of %.1f s not passed on", late, exc_info=True)
                continue
            log.warning("API event loop ran %.1f s late; %s leases given that long again", late, moved)


class AioListener:
    """One `grpc.aio` server on its own event loop thread, driven from any thread like `grpc.Server`.
    `on_lag` (seconds) is told when the loop itself ran late (`watch_lag`)."""

    def __init__(self, handlers: Callable[[Pools], list[grpc.GenericRpcHandler]],
                 address: str, credentials: grpc.ServerCredentials, options: list[tuple[str, Any]],
                 pool_size: int, call_threads: int = 16,
                 on_lag: Callable[[float], Any] | None = None) -> None:
        self.pool = Pools(min(call_threads, pool_size), pool_size)
        self._on_lag = on_lag
        self._lag_task: asyncio.Task | None = None
        self._loop = asyncio.new_event_loop()
        # `asyncio.to_thread` of coroutine handlers (each heartbeat's store calls) waits on the store:
        # on etcd that is two round trips per beat, and the default six threads (2 cores) queued 200
        # nodes' beats past their leases under load, so nodes expired and re-registered en masse.
        waits = futures.ThreadPoolExecutor(pool_size, thread_name_prefix="cca-api-wait")  # started on demand
        self._loop.set_default_executor(waits)
        self._thread = threading.Thread(target=self._loop.run_forever, name="cca-api-loop", daemon=True)
        self._thread.start()

        async def create() -> tuple[grpc.aio.Server, int]:
            server = grpc.aio.server(options=options)
            server.add_generic_rpc_handlers(handlers(self.pool))
            try:
                port = server.add_secure_port(address, credentials)
            except RuntimeError as exc:
                raise CcaError(f"cannot listen on {address}: {exc}") from None
            return server, port

        try:
            self._server, self.port = self._run(create())
        except BaseException:
            self._shutdown()
            raise

    def _run(self, coroutine: Any, timeout: float | None = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def start(self) -> None:
        self._run(self._server.start())
        if self._on_lag is not None:
            async def begin() -> asyncio.Task:
                return asyncio.get_running_loop().create_task(watch_lag(self._on_lag))
            self._lag_task = self._run(begin())

    def stop(self, grace: float | None) -> None:
        if self._loop.is_closed():
            return
        try:
            if self._lag_task is not None:
                self._loop.call_soon_threadsafe(self._lag_task.cancel)
            self._run(self._server.stop(grace), None)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self.pool.shutdown()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

