"""Turns a servicer object into gRPC handlers: each call is parsed (malformed protobuf is
INVALID_ARGUMENT), authenticated, rate-limited, timed, audited when security-relevant, and its
errors mapped to status codes with the error's message (never a traceback)."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from ccattler.engine.admission.model import Principal
from ccattler.engine.api import audit
from ccattler.engine.api.errors import BadRequest, RateLimited, Unauthenticated, status_of
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.limits import RateLimiter
from ccattler.engine.api.metrics import ApiMetrics
from ccattler.engine.api.requests import check_request
from ccattler.engine.facts import CcaError

log = logging.getLogger("ccattler.api")

_DENIED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}


@dataclass(frozen=True, slots=True)
class Call:
    """One request as a servicer sees it: who asks, the request id, and the gRPC context."""

    principal: Principal | None
    request_id: str
    context: grpc.ServicerContext
    peer: str


@dataclass(frozen=True, slots=True)
class Plumbing:
    """What every handler of one listener shares."""

    audit: audit.AuditLog
    authenticate: Callable[[grpc.ServicerContext], Principal]
    limiter: RateLimiter
    metrics: ApiMetrics
    #: Failed authentications per peer host: past it, failures are refused without an audit write.
    failures: RateLimiter


class AuditUnavailable(CcaError):
    """An audited call is refused because its audit record could not be written."""

    retriable = True


#: The status message travels percent-encoded in the `grpc-message` header; clients drop a call
#: whose headers pass 16 KiB ("metadata size exceeds hard limit"), losing the message — found by
#: tests/fuzz (30,000 refused services in one apply).
MAX_DETAILS_BYTES = 8 * 1024


def status_details(text: str) -> str:
    """`text` cut so that its percent-encoded form fits `MAX_DETAILS_BYTES`, saying how much was cut."""
    cost = 0
    for at, char in enumerate(text):
        cost += 1 if " " <= char <= "~" and char != "%" else 3 * len(char.encode("utf-8", "replace"))
        if cost > MAX_DETAILS_BYTES - 64:
            return f"{text[:at]}… ({len(text) - at} more characters)"
    return text


def _who(call: Call | None, context: grpc.ServicerContext) -> str:
    name = call.principal.name if call and call.principal else f"anonymous@{context.peer()}"
    return audit.bounded(name, 200)


def _parse(cls: type, raw: bytes) -> Any:
    message = cls()
    try:
        message.ParseFromString(raw)
    except DecodeError as exc:
        raise BadRequest(f"malformed {cls.__name__} message: {exc}") from None
    check_request(message)
    return message


class _Handling:
    """Runs one call: authentication, limits, the servicer, audit, metrics, status mapping."""

    def __init__(self, plumbing: Plumbing, servicer: Any, name: str, public: bool) -> None:
        self.plumbing, self.servicer, self.name, self.public = plumbing, servicer, name, public
        self.fn = getattr(servicer, name)
        #: A read repeated with the same outcome (a periodic secret refresh) is recorded once:
        #: `audit.AuditLog.record_once`. It runs first and is answered only once audited.
        self.coalesced = name in getattr(servicer, "AUDIT_COALESCED", ())

    def begin(self, context: grpc.ServicerContext) -> Call:
        peer = context.peer()
        host = peer.rsplit(":", 1)[0]
        try:
            principal = None if self.public else self.plumbing.authenticate(context)
        except Unauthenticated:
            if not self.plumbing.failures.allow(host):
                self.plumbing.metrics.denials.labels("rate").inc()
                raise RateLimited(f"too many failed authentications from {host}; retry later") from None
            raise
        call = Call(principal, uuid.uuid4().hex[:12], context, peer)
        self.limit(call)
        return call

    def limit(self, call: Call) -> None:
        """The caller's rate limit, for a call and for each further message of a client stream (a
        node's heartbeats share one stream)."""
        key = call.principal.name if call.principal else call.peer.rsplit(":", 1)[0]
        if not self.plumbing.limiter.allow(key):
            self.plumbing.metrics.denials.labels("rate").inc()
            raise RateLimited(f"rate limit exceeded for {key}; retry in a moment")

    def target(self, request: Any) -> str | None:
        describe = getattr(self.servicer, "audit_object", None)
        target = describe(self.name, request) if describe and request is not None else None
        return None if target is None else audit.bounded(target, audit.MAX_OBJECT_CHARS)

    def intend(self, call: Call, request: Any) -> audit.AuditRecord | None:
        """Fail closed: an audited call's record is written (decision `requested`) before the call
        runs; when that write fails the call is refused and nothing changes."""
        target = self.target(request)
        if target is None:
            return None
        entry = audit.AuditRecord(call.request_id, time.time(), _who(call, call.context), self.name, target,
                                  "requested")
        try:
            self.plumbing.audit.record(entry)
        except Exception as exc:
            log.exception("could not write audit record %s; refusing the call", entry)
            raise AuditUnavailable(f"{self.name} refused: its audit record could not be written "
                                   f"({type(exc).__name__}); nothing was changed") from None
        return entry

    def deliver(self, call: Call, request: Any, reply: Any) -> None:
        """The record of a coalesced read that succeeded, before its answer goes out: written
        unless it delivers what the last record for the same caller and object did (fail closed:
        unwritten, the answer is refused)."""
        target = self.target(request)
        if target is None:
            return
        entry = audit.AuditRecord(call.request_id, time.time(), _who(call, call.context), self.name, target,
                                  "allowed")
        digest = hashlib.sha256(reply.SerializeToString(deterministic=True)).hexdigest()
        try:
            self.plumbing.audit.record_once(entry, digest)
        except Exception as exc:
            log.exception("could not write audit record %s; refusing the call", entry)
            raise AuditUnavailable(f"{self.name} refused: its audit record could not be written "
                                   f"({type(exc).__name__}); nothing was delivered") from None

    def audit(self, call: Call | None, context: grpc.ServicerContext, request: Any,
              code: grpc.StatusCode, message: str, intent: audit.AuditRecord | None = None) -> None:
        """The outcome, over the intent record when there is one (same key)."""
        target = intent.object if intent else self.target(request)
        denied = code in _DENIED
        if target is None and not denied:
            return
        decision = "allowed" if code == grpc.StatusCode.OK else ("denied" if denied else "failed")
        reason = audit.bounded(message, audit.MAX_REASON_CHARS)
        if intent is not None:
            entry = replace(intent, decision=decision, reason=reason)
        else:
            entry = audit.AuditRecord(call.request_id if call else uuid.uuid4().hex[:12], time.time(),
                                      _who(call, context), self.name, target or "", decision, reason)
        try:
            if self.coalesced:
                self.plumbing.audit.record_once(entry, f"{decision}: {reason}")
            else:
                self.plumbing.audit.record(entry)
        except Exception:  # the intent record already stands for the call; this one adds the outcome
            log.exception("could not write the outcome of audit record %s", entry)

    def fail(self, exc: BaseException, call: Call | None) -> tuple[grpc.StatusCode, str]:
        code = status_of(exc)
        if code == grpc.StatusCode.INTERNAL:
            rid = call.request_id if call else "-"
            log.exception("internal error in %s (request %s)", self.name, rid)
            return code, f"internal error (request {rid}); the server log has details"
        if code in _DENIED:
            self.plumbing.metrics.denials.labels(code.name.lower()).inc()
        return code, status_details(str(exc))

    def finish(self, code: grpc.StatusCode, started: float) -> None:
        self.plumbing.metrics.requests.labels(self.name, code.name).inc()
        self.plumbing.metrics.latency.labels(self.name).observe(time.perf_counter() - started)


def _unary(h: _Handling, request_cls: type) -> Callable:
    def behavior(raw: bytes, context: grpc.ServicerContext) -> Any:
        started, call, request, code, message = time.perf_counter(), None, None, grpc.StatusCode.OK, ""
        intent, audited = None, False
        try:
            call = h.begin(context)
            request = _parse(request_cls, raw)
            if h.coalesced:
                reply = h.fn(request, call)
                h.deliver(call, request, reply)
                audited = True
                return reply
            intent = h.intend(call, request)
            return h.fn(request, call)
        except Exception as exc:
            code, message = h.fail(exc, call)
        finally:
            if not audited:
                h.audit(call, context, request, code, message, intent)
            h.finish(code, started)
        context.abort(code, message)

    return behavior


def _streaming(h: _Handling, request_cls: type, client_streaming: bool) -> Callable:
    def behavior(raw: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        started, call, request, code, message = time.perf_counter(), None, None, grpc.StatusCode.OK, ""
        h.plumbing.metrics.streams.labels(h.name).inc()
        first: list[Any] = []  # a client stream's opening message describes the call (audit)
        intents: list[audit.AuditRecord | None] = [None]
        try:
            call = h.begin(context)
            if client_streaming:
                opened = call

                def parsed() -> Iterator[Any]:
                    for r in raw:
                        parsed_message = _parse(request_cls, r)
                        if not first:
                            first.append(parsed_message)
                            intents[0] = h.intend(opened, parsed_message)
                        yield parsed_message

                yield from h.fn(parsed(), call)
            else:
                request = _parse(request_cls, raw)
                intents[0] = h.intend(call, request)
                yield from h.fn(request, call)
        except Exception as exc:
            code, message = h.fail(exc, call)
        finally:
            h.plumbing.metrics.streams.labels(h.name).dec()
            h.audit(call, context, request or (first[0] if first else None), code, message, intents[0])
            h.finish(code, started)
        if code != grpc.StatusCode.OK:
            context.abort(code, message)

    return behavior


def _serializer(cls: type) -> Callable[[Any], bytes]:
    """Serializes a reply; a handler may also yield bytes it serialized itself (slice batches)."""
    to_bytes = cls.SerializeToString
    return lambda reply: reply if isinstance(reply, bytes) else to_bytes(reply)


def _blocking(fn: Callable[..., AsyncIterator[Any]]) -> Callable[..., Iterator[Any]]:
    """A coroutine stream (an async generator method) driven from a sync server's thread on a
    private event loop, ending when the call does (the aio listener runs such methods natively)."""

    def run(request: Any, call: Call) -> Iterator[Any]:
        loop = asyncio.new_event_loop()
        if isinstance(request, Iterator):  # a client stream: handed on as an async iterator
            request = _aiter(request)
        replies = fn(request, call)
        try:
            while call.context.is_active():
                step = loop.create_task(replies.__anext__())
                while not step.done() and call.context.is_active():
                    loop.run_until_complete(asyncio.wait([step], timeout=1.0))
                if not step.done():
                    step.cancel()
                    loop.run_until_complete(asyncio.wait([step]))
                    return
                try:
                    yield step.result()
                except StopAsyncIteration:
                    return
        finally:
            loop.run_until_complete(replies.aclose())
            loop.close()

    return run


async def _aiter(items: Iterator[Any]) -> AsyncIterator[Any]:
    for item in items:  # blocks this (sync server) thread's private loop: it serves only this call
        yield item


def handler(service: str, servicer: Any, plumbing: Plumbing, public: frozenset[str] = frozenset()
            ) -> grpc.GenericRpcHandler:
    """gRPC handlers for every method of `service` (ccattler.v1.<service>) implemented by `servicer`."""
    methods = {}
    for method in api_pb2.DESCRIPTOR.services_by_name[service].methods:
        request_cls = getattr(api_pb2, method.input_type.name)
        h = _Handling(plumbing, servicer, method.name, method.name in public)
        if inspect.isasyncgenfunction(h.fn):
            h.fn = _blocking(h.fn)
        serialize = _serializer(getattr(api_pb2, method.output_type.name))
        if method.client_streaming and method.server_streaming:
            methods[method.name] = grpc.stream_stream_rpc_method_handler(
                _streaming(h, request_cls, True), response_serializer=serialize)
        elif method.server_streaming:
            methods[method.name] = grpc.unary_stream_rpc_method_handler(
                _streaming(h, request_cls, False), response_serializer=serialize)
        else:
            methods[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(h, request_cls), response_serializer=serialize)
    return grpc.method_handlers_generic_handler(f"ccattler.v1.{service}", methods)
