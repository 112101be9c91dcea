"""The client library the CLI and agents use: opens a TLS channel from a `Context` (mutual TLS with
a client certificate, or a bearer token over server-verified TLS) and turns gRPC failures into
`ApiError`s that say which address and which certificate failed.

A context may name several API servers (`a:7443,b:7443`, all serving one cluster on one etcd):
the channel then holds every address (gRPC's pick_first) and moves to the next one that answers
when its server goes away; streams broken by that end with UNAVAILABLE and their callers resume
them from the last revision they saw (agent/loop.py), so no full re-list follows a server's loss."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from ccattler.engine.api.client_calls import ClusterCalls
from ccattler.engine.api.errors import RETRIABLE_CODES, fell_behind_at
from ccattler.engine.api.gen.ccattler.v1 import api_pb2, api_pb2_grpc
from ccattler.engine.api.sources import to_wire
from ccattler.engine.clientconfig import Context, server_list, token_address
from ccattler.engine.facts import CcaError
from ccattler.engine.facts.keys import DERIVED, DESIRED, OBSERVED
from ccattler.engine.pki import PkiError, load_cert

if TYPE_CHECKING:
    from ccattler.dsl import Source

DEFAULT_TIMEOUT = 60.0
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

log = logging.getLogger(__name__)


class ApiError(CcaError):
    """A call to the API server failed; `code` is the gRPC status."""

    def __init__(self, message: str, code: grpc.StatusCode) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = code in RETRIABLE_CODES


def _read(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CcaError(f"cannot read {what} {path}: {exc.strerror}") from None


def _check_cert(path: str, pem: bytes) -> None:
    try:
        cert = load_cert(pem)
    except PkiError as exc:
        raise CcaError(f"client certificate {path}: {exc}") from None
    if cert.not_valid_after_utc < dt.datetime.now(dt.UTC):
        raise CcaError(f"client certificate {path} expired at {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC")


def channel_target(address: str) -> tuple[str, str | None]:
    """(gRPC target, TLS name) for one `host:port` or a list `a:p,b:p`: a list becomes one
    `ipv4:`/`ipv6:` target of every address (names resolved now), verified as the first host."""
    servers = server_list(address)
    if len(servers) <= 1:
        return address, None
    import ipaddress
    import socket

    from ccattler.engine.pki import split_address

    resolved: list[str] = []
    families = set()
    for server in servers:
        host, port = split_address(server)
        try:
            ip = ipaddress.ip_address(host)
            ips = [ip]
        except ValueError:
            try:
                ips = [ipaddress.ip_address(info[4][0]) for info in socket.getaddrinfo(
                    host, port, type=socket.SOCK_STREAM)]
            except OSError as exc:
                raise CcaError(f"API server {server!r}: cannot resolve {host}: {exc}") from None
        for one in ips[:1]:
            families.add(one.version)
            resolved.append(f"[{one}]:{port}" if one.version == 6 else f"{one}:{port}")
    if len(families) > 1:
        raise CcaError(f"API servers {address!r}: mix IPv4 and IPv6 addresses; give one family")
    scheme = "ipv6" if families == {6} else "ipv4"
    return f"{scheme}:{','.join(resolved)}", split_address(servers[0])[0]


class Client(ClusterCalls):
    """A connection to one API server; use as a context manager or call `close()`."""

    def __init__(
        self, context: Context, *, timeout: float = DEFAULT_TIMEOUT, anonymous: bool = False
    ) -> None:
        self.context, self.timeout = context, timeout
        ca = _read(context.ca, "CA certificate")
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.keepalive_time_ms", 30_000), ("grpc.keepalive_timeout_ms", 10_000)]
        if context.cert and context.key and not context.token and not anonymous:
            cert, key = _read(context.cert, "client certificate"), _read(context.key, "client key")
            assert cert is not None
            _check_cert(context.cert, cert)
            self.address = context.server
            self.auth = f"mutual TLS with client certificate {context.cert}, CA {context.ca}"
            credentials = grpc.ssl_channel_credentials(ca, key, cert)
        else:
            self.address = context.token_server or token_address(context.server)
            credentials = grpc.ssl_channel_credentials(ca)
            if context.token and not anonymous:
                self.auth = f"bearer token over TLS, CA {context.ca}"
                credentials = grpc.composite_channel_credentials(
                    credentials, grpc.access_token_call_credentials(context.token))
            else:
                self.auth = f"TLS without client credentials, CA {context.ca}"
        target, name = channel_target(self.address)
        if name:  # several servers: one certificate (one cluster PKI) names them all
            options += [("grpc.ssl_target_name_override", name), ("grpc.default_authority", name)]
        self.channel = grpc.secure_channel(target, credentials, options=options)
        self.cluster = api_pb2_grpc.ClusterStub(self.channel)
        self.agent = api_pb2_grpc.AgentStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def error(self, exc: grpc.RpcError) -> ApiError:
        """`exc` as the `ApiError` users read (what failed, where, and what to check)."""
        code, details = exc.code(), exc.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE:
            return ApiError(f"cannot reach the API server at {self.address} ({self.auth}): {details}. "
                            "Check that the server runs and that the CA and certificate belong to this "
                            "cluster", code)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return ApiError(f"the API server at {self.address} did not answer within {self.timeout:g}s", code)
        return ApiError(details or code.name.lower(), code)

    def unary(self, stub: Any, method: str, request: Any, timeout: float | None = None) -> Any:
        try:
            return getattr(stub, method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            raise self.error(exc) from None

    def json(self, method: str, request: Any = None, timeout: float | None = None) -> Any:
        """Call a Cluster method that answers JSON; the decoded value."""
        reply = self.unary(self.cluster, method, request if request is not None else api_pb2.Empty(), timeout)
        return json.loads(reply.json)

    def stream(self, stub: Any, method: str, request: Any, timeout: float | None = None) -> Iterator[Any]:
        try:
            yield from getattr(stub, method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise self.error(exc) from None

    def watch(self, prefix: str, from_revision: int = 0, resume: bool = True) -> Iterator[dict[str, Any]]:
        """Events under `prefix` after `from_revision` (resume by passing the last revision seen).

        A server that drops this watch for reading too slowly (RESOURCE_EXHAUSTED "fell behind at
        revision R") is asked again from R: events of R may come twice, none is lost. A resumed
        watch that falls behind again before delivering anything gives up with that error."""
        while True:
            request = api_pb2.WatchRequest(prefix=prefix, from_revision=from_revision)
            progressed = False
            try:
                for event in self.stream(self.cluster, "Watch", request):
                    progressed = True
                    yield {"kind": event.kind, "key": event.key, "revision": event.revision,
                           "value": json.loads(event.value_json) if event.value_json else None}
                return
            except ApiError as exc:
                at = fell_behind_at(str(exc)) if exc.code == grpc.StatusCode.RESOURCE_EXHAUSTED else None
                if not resume or at is None or (not progressed and at <= from_revision):
                    raise
                log.warning("%s: resuming from revision %d", exc, at)
                from_revision = at

    def watch_state(self, from_revision: int = 0) -> Iterator[dict[str, Any]]:
        """Events of desired/, derived/ and observed/ as three watches merged (in arrival order):
        unlike the empty prefix (cluster.admin's), each root streams what the caller may read."""
        import queue
        import threading

        events: queue.Queue[Any] = queue.Queue(maxsize=10_000)
        streams = [self.cluster.Watch(api_pb2.WatchRequest(prefix=root, from_revision=from_revision))
                   for root in (DESIRED, DERIVED, OBSERVED)]

        def pump(stream: Any) -> None:
            try:
                for event in stream:
                    events.put(event)
            except grpc.RpcError as exc:
                events.put(exc)

        for stream in streams:
            threading.Thread(target=pump, args=(stream,), daemon=True).start()
        try:
            while True:
                item = events.get()
                if isinstance(item, grpc.RpcError):
                    if item.code() == grpc.StatusCode.CANCELLED:
                        return
                    raise self.error(item)
                yield {"kind": item.kind, "key": item.key, "revision": item.revision,
                       "value": json.loads(item.value_json) if item.value_json else None}
        finally:
            for stream in streams:
                stream.cancel()

    # Convenience wrappers for the common calls.

    def apply(self, sources: Sequence[Source], tenant: str = "", dry_run: bool = False) -> Any:
        """Apply loaded sources (`dsl.load_sources`); files they read with `from` are sent along."""
        messages, files = to_wire(sources, tenant or "default")
        return self.json("Apply", api_pb2.ApplyRequest(sources=messages, files=files, tenant=tenant,
                                                       dry_run=dry_run))

    def diff(self, sources: Sequence[Source], tenant: str = "") -> Any:
        messages, files = to_wire(sources, tenant or "default")
        return self.json("Diff", api_pb2.ApplyRequest(sources=messages, files=files, tenant=tenant))

    def plan(self, sources: Sequence[Source], tenant: str = "") -> Any:
        """Where everything would run if `sources` were applied now (live state; nothing written)."""
        messages, files = to_wire(sources, tenant or "default")
        return self.json("Plan", api_pb2.ApplyRequest(sources=messages, files=files, tenant=tenant))

    def delete_files(self, sources: Sequence[Source], tenant: str = "") -> Any:
        messages, files = to_wire(sources, tenant or "default")
        return self.json("Delete", api_pb2.DeleteRequest(sources=messages, files=files, tenant=tenant))

    def get(self, kind: str, name: str = "", tenant: str = "", all_tenants: bool = False,
            tags: dict[str, str] | None = None) -> Any:
        return self.json("Get", api_pb2.GetRequest(kind=kind, name=name, tenant=tenant,
                                                   all_tenants=all_tenants, tags=tags or {}))
