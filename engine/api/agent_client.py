"""What a node agent calls, as plain Python: register and keep the node's lease alive, watch the
node's slice, report observed documents, fetch granted secrets, get workload identities.

`Heartbeat` runs a background thread that beats every `interval` seconds (a third of the lease TTL
by default); stopping it (or the process dying) lets the lease, and the node's facts, expire.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import grpc

from ccattler.engine.api.backoff import Backoff
from ccattler.engine.api.client import ApiError, Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.facts import CcaError
from ccattler.engine.facts.keys import DNS, ENDPOINTS, VIPS

#: (name, plaintext, mount path) of each secret and connection an instance is granted.
SecretValues = list[tuple[str, bytes, str]]
#: Instances per batched FetchSecrets (the server refuses more): bigger ticks go in several calls.
MAX_SECRET_BATCH = 1000

#: Slice documents handed on as JSON text, decoded when read (the cluster-wide routing data).
LAZY_PREFIXES = (ENDPOINTS, VIPS, DNS)
#: The first retry's ceiling (seconds) while the API server is unreachable (failing over); later
#: retries back off with full jitter up to half an interval (engine/api/backoff.py).
RETRY_PAUSE = 0.2
#: The shortest deadline of one beat (seconds): below it a beat could not get through anyway.
MIN_BEAT_DEADLINE = 1.0


class Heartbeat:
    """A thread beating for one lease every `interval` seconds; `stop()` ends it, `error` holds why
    it failed (the agent then registers again).

    The beats go over one Heartbeat stream, a request and its reply per beat, reopened when it
    breaks (another of the context's servers then takes it). A call per beat cost the server its
    authentication, limits and HTTP/2 stream set-up every time: at 1,000 idle nodes half of its CPU
    (docs/benchmarks.md, "Heartbeats on one stream"). A beat's deadline is what is left of the lease
    (`ttl`, three intervals by default) since the last beat that got through: a slow server that
    would still renew in time is waited for, not given up on — cancelled beats behind a busy server
    were how a thousand nodes lost their leases together ("1,000 idle nodes").
    """

    def __init__(self, client: Client, lease: int, interval: float, ttl: float | None = None) -> None:
        self.lease, self.interval = lease, interval
        self.ttl = ttl if ttl is not None else 3 * interval
        self._backoff = Backoff(base=min(RETRY_PAUSE, interval / 2), cap=max(RETRY_PAUSE, interval / 2))
        self.error: Exception | None = None
        self.revision = 0
        self._last_ok = time.monotonic()
        self._stop = threading.Event()
        self._call: Any = None
        self._client = client
        self._thread = threading.Thread(target=self._run, name=f"cca-heartbeat-{lease}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stream():
                # The stream broke (the server went away): the lease lives in the store, so beat
                # it through the next server while it can still be saved (two intervals of its
                # three), instead of registering a new lease.
                if self._stop.wait(self._backoff.next()):
                    return
        except Exception as exc:  # reported through `error`/`alive`; the agent re-registers
            self.error = exc

    def _stream(self) -> bool:
        """Beat over one stream until stopped (True) or it breaks retriably in time (False)."""
        beats: queue.SimpleQueue[Any] = queue.SimpleQueue()
        replies: queue.SimpleQueue[Any] = queue.SimpleQueue()
        call = self._call = self._client.agent.Heartbeat(iter(beats.get, None))
        if self._stop.is_set():
            call.cancel()  # stop() came before this stream existed
        threading.Thread(target=_pump, args=(call, replies), name=f"cca-heartbeat-{self.lease}-replies",
                         daemon=True).start()
        request = api_pb2.HeartbeatRequest(lease=self.lease)
        try:
            while True:
                sent = time.monotonic()
                deadline = max(MIN_BEAT_DEADLINE, self._last_ok + self.ttl - sent)
                beats.put(request)
                try:
                    reply = replies.get(timeout=deadline)
                except queue.Empty:
                    why = f"the API server at {self._client.address} did not renew lease {self.lease} in time"
                    raise ApiError(f"{why} ({deadline:.1f}s)", grpc.StatusCode.DEADLINE_EXCEEDED) from None
                if isinstance(reply, grpc.RpcError):
                    if self._stop.is_set():
                        return True
                    # A server stopping cancels its open streams: a break like a lost server's.
                    error = self._client.error(reply)
                    broke = error.retriable or error.code == grpc.StatusCode.CANCELLED
                    if not broke or time.monotonic() - self._last_ok > 2 * self.interval:
                        raise error
                    return False
                self.revision = reply.revision
                self._last_ok = time.monotonic()
                self._backoff.reset()
                # Beat at a fixed rate: a slow reply must not push the next beat out by its delay.
                if self._stop.wait(max(0.0, sent + self.interval - time.monotonic())):
                    return True
        finally:
            beats.put(None)  # ends the request stream
            call.cancel()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._call is not None:
            self._call.cancel()  # a beat waiting for its reply ends now
        self._thread.join(timeout=self.interval + 5)


def _pump(call: Any, replies: queue.SimpleQueue[Any]) -> None:
    """A stream's replies into `replies`, then the error it ended with (EOF counts as UNAVAILABLE)."""
    try:
        for reply in call:
            replies.put(reply)
        replies.put(_Ended(grpc.StatusCode.UNAVAILABLE, "the server ended the heartbeat stream"))
    except grpc.RpcError as exc:
        replies.put(exc)


class _Ended(grpc.RpcError):
    """A stream that ended without a status error, shaped like one."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def slice_events(message: api_pb2.Event) -> Iterator[dict[str, Any]]:
    """The events of one WatchSlice message (a batch or a single event) as `SliceState` takes them."""
    for event in message.events if message.kind == "batch" else (message,):
        if event.key.startswith(LAZY_PREFIXES) and event.value_json:
            # Every node gets these, few read them: `SliceState` decodes them on first use.
            yield {"kind": event.kind, "key": event.key, "revision": event.revision,
                   "value_json": event.value_json}
            continue
        yield {"kind": event.kind, "key": event.key, "revision": event.revision,
               "value": json.loads(event.value_json) if event.value_json else None}


class AgentClient:
    """The agent-facing calls over one mutual-TLS `Client` (node certificate)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def register(self, node_doc: Mapping[str, Any], ttl: float = 15.0) -> int:
        """Publish `observed/node/<this node>` under a new lease; returns the lease id."""
        reply = self.client.unary(self.client.agent, "RegisterNode",
                                  api_pb2.RegisterRequest(node_json=json.dumps(node_doc), ttl_seconds=ttl))
        return reply.lease

    def heartbeat(self, lease: int, interval: float = 5.0, ttl: float | None = None) -> Heartbeat:
        return Heartbeat(self.client, lease, interval, ttl)

    def watch_slice(self, from_revision: int = 0) -> Iterator[dict[str, Any]]:
        """The node's slice: with 0, every current fact as `put`, then `synced`, then changes."""
        request = api_pb2.WatchRequest(from_revision=from_revision)
        for message in self.client.stream(self.client.agent, "WatchSlice", request):
            yield from slice_events(message)

    def report(self, observations: Mapping[str, Any | None]) -> int:
        """Write observed documents (None deletes) in one transaction; returns its revision."""
        items = [api_pb2.Observation(key=k, value_json="" if v is None else json.dumps(v))
                 for k, v in observations.items()]
        reply = self.client.unary(self.client.agent, "Report", api_pb2.ReportRequest(observations=items))
        return json.loads(reply.json)["revision"]

    def fetch_secrets(self, instance: str) -> list[tuple[str, bytes, str]]:
        """(name, value, mount) of every secret granted to `tenant/instance` (placed on this node)."""
        request = api_pb2.SecretsRequest(instance=instance)
        reply = self.client.unary(self.client.agent, "FetchSecrets", request)
        return [(s.name, s.value, s.mount) for s in reply.secrets]

    def fetch_secrets_many(self, instances: Sequence[str]) -> dict[str, SecretValues | CcaError]:
        """`fetch_secrets` for several instances in one call: each maps to its secrets or its error.

        A server that predates batches ignores `instances` and refuses the empty `instance` (or
        answers without `instances`): then one call per instance, as before.
        """
        if not instances:
            return {}
        if len(instances) > MAX_SECRET_BATCH:
            size = MAX_SECRET_BATCH
            chunks = (instances[start:start + size] for start in range(0, len(instances), size))
            return {ref: values for chunk in chunks for ref, values in self.fetch_secrets_many(chunk).items()}
        request = api_pb2.SecretsRequest(instances=list(instances))
        try:
            reply = self.client.unary(self.client.agent, "FetchSecrets", request)
        except ApiError as exc:
            if exc.code != grpc.StatusCode.INVALID_ARGUMENT:
                raise
            reply = None  # an old server parsing the empty `instance`
        if reply is None or not reply.instances:
            return {ref: self._fetch_one(ref) for ref in instances}
        return {a.instance: CcaError(a.error) if a.error else [(s.name, s.value, s.mount) for s in a.secrets]
                for a in reply.instances}

    def _fetch_one(self, instance: str) -> SecretValues | CcaError:
        try:
            return self.fetch_secrets(instance)
        except CcaError as exc:
            return exc

    def issue_identity(self, instance: str, csr: bytes) -> tuple[bytes, bytes]:
        """(certificate, trust bundle) PEMs of `tenant/instance`'s workload identity for the CSR's
        key (agent/identity.py makes the CSR and keeps the key)."""
        reply = self.client.unary(self.client.agent, "IssueIdentity",
                                  api_pb2.IdentityRequest(instance=instance, csr=csr))
        return reply.cert, reply.bundle

    def tunnel(self, ups: Iterator[api_pb2.TunnelUp]) -> Any:
        """Open the node's tunnel (agent/tunnel.py): a call yielding `TunnelDown`s; `cancel()` ends it."""
        return self.client.agent.Tunnel(ups)
