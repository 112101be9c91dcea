"""`Cluster.Logs` and `Cluster.Exec`: find the instances a request names, check `service.logs` /
`service.exec` on their services, and relay sessions through the nodes' tunnels (`TunnelHub`)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ccattler.engine.api.errors import BadRequest, NotFound
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.tunnel import Session, TunnelHub
from ccattler.engine.facts import CcaError, parse_service, service_doc
from ccattler.engine.facts.keys import DESIRED_SERVICES, PLACEMENTS
from ccattler.engine.store import Store

#: `allow(capability, "tenant/service")` raises unless the caller may.
Allow = Callable[[str, str], None]


@dataclass(frozen=True, slots=True)
class Target:
    """One instance a logs or exec request reaches."""

    tenant: str
    instance: str
    service: str  # tenant/service
    node: str | None

    @property
    def key(self) -> str:
        return f"{self.tenant}/{self.instance}"


def _placed(store: Store, tenant: str, service: str | None = None, instance: str | None = None
            ) -> list[Target]:
    prefix = f"{PLACEMENTS}{tenant}/" + (instance or "")
    facts = store.range(prefix)[0] if instance is None else [f for f in [store.get(prefix)] if f]
    return [Target(tenant, f.value.get("instance") or f.key.rsplit("/", 1)[-1], str(f.value.get("service")),
                   f.value.get("node"))
            for f in facts if service is None or f.value.get("service") == service]


def resolve(store: Store, tenant: str, target: str, tags: dict[str, str] | None = None) -> list[Target]:
    """The instances of a service, one instance, or (with `tags`) every tenant service tagged so."""
    if tags:
        found = []
        for fact in store.range(f"{DESIRED_SERVICES}{tenant}/")[0]:
            mine = service_doc.tags(fact.value)
            if all(mine.get(k) == v for k, v in tags.items()):
                found += _placed(store, tenant, service=f"{tenant}/{fact.value.get('name')}")
        return found
    if not target:
        raise BadRequest("name a service or an instance (or give --tag)")
    ref = parse_service(target, tenant)
    if store.get(f"{DESIRED_SERVICES}{ref.tenant}/{ref.name}") is not None:
        return _placed(store, ref.tenant, service=ref.full)
    found = _placed(store, ref.tenant, instance=ref.name)
    if not found:
        raise NotFound(f"no service or instance {ref.full}")
    return found


def stream_logs(hub: TunnelHub, targets: list[Target], request: api_pb2.LogsRequest,
                active: Callable[[], bool]) -> Iterator[api_pb2.LogChunk]:
    """Every target's log, interleaved as it arrives; ends when all end (never, with follow)."""
    for name in ("since_seconds", "since_time"):
        value = getattr(request, name)
        if not 0 <= value < 1e12:  # also refuses NaN
            raise BadRequest(f"logs: {name} must be a number of seconds ≥ 0, got {value}")
    output: queue.Queue[tuple[Session, api_pb2.TunnelUp]] = queue.Queue()
    sessions: list[Session] = []
    try:
        for target in targets:
            if target.node is None:
                yield api_pb2.LogChunk(instance=target.key, data=b"[cca] not placed on any node\n")
                continue
            try:
                sessions.append(hub.open(target.node, "logs", {
                    "instance": target.key, "follow": request.follow, "tail": request.tail,
                    "since_seconds": request.since_seconds, "since_time": request.since_time,
                    "init": request.init},
                    target.key, output))
            except CcaError as exc:
                yield api_pb2.LogChunk(instance=target.key, data=f"[cca] {exc}\n".encode())
        open_sessions = len(sessions)
        while open_sessions and active():
            try:
                session, up = output.get(timeout=0.5)
            except queue.Empty:
                continue
            if up.data:
                yield api_pb2.LogChunk(instance=session.label, data=up.data)
            if up.closed:
                open_sessions -= 1
                if up.error:
                    yield api_pb2.LogChunk(instance=session.label, data=f"[cca] {up.error}\n".encode())
    finally:
        for session in sessions:
            session.cancel()


def relay_exec(hub: TunnelHub, target: Target, first: api_pb2.ExecInput, inputs: Iterator[api_pb2.ExecInput],
               active: Callable[[], bool]) -> Iterator[api_pb2.ExecOutput]:
    """Run `first.command` in `target` on its node; stdin flows in, output and the exit code out."""
    if target.node is None:
        raise CcaError(f"instance {target.key} is not placed on any node")
    request = {"instance": target.key, "command": list(first.command), "tty": first.tty}
    if first.HasField("resize"):
        request["size"] = [first.resize.rows, first.resize.cols]
    session = hub.open(target.node, "exec", request, target.key)
    if first.stdin or first.stdin_closed:
        session.send(first.stdin, first.stdin_closed)

    def feed() -> None:
        try:
            for message in inputs:
                if message.HasField("resize"):
                    session.resize(message.resize.rows, message.resize.cols)
                if message.stdin or message.stdin_closed:
                    session.send(message.stdin, message.stdin_closed)
        except Exception:  # the client went away: the exec sees end of input
            pass
        session.send(b"", True)

    threading.Thread(target=feed, name=f"cca-exec-{session.id}", daemon=True).start()
    try:
        while active():
            try:
                _, up = session.output.get(timeout=0.5)
            except queue.Empty:
                continue
            if up.data:
                yield api_pb2.ExecOutput(stdout=up.data) if up.fd != 2 else api_pb2.ExecOutput(stderr=up.data)
            if up.closed:
                if up.error:
                    raise CcaError(f"exec in {target.key}: {up.error}")
                yield api_pb2.ExecOutput(exited=True, exit_code=up.exit_code)
                return
    finally:
        session.cancel()
