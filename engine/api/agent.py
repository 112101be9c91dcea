"""The agent-facing calls: join with a token and a CSR, renew the node certificate, issue workload
identities (engine/api/identity_calls.py), register and heartbeat (the server holds the node's
store lease), watch the node's own slice, report observed state for its own node and instances
only, and fetch granted secrets.

`NODE_TTL` is the default node lease; a node whose heartbeat stream stops vanishes when it expires.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from ccattler.engine.api.agent_client import MAX_SECRET_BATCH
from ccattler.engine.api.calls import Call
from ccattler.engine.api.connections import connection_files
from ccattler.engine.api.errors import BadRequest, Conflict, Forbidden, NotFound
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.identity_calls import IdentityCalls, identity_summary
from ccattler.engine.api.report_scope import check_report, report_view
from ccattler.engine.api.requests import load_object
from ccattler.engine.api.slice import SliceHub
from ccattler.engine.api.slice_queue import batch_message
from ccattler.engine.api.tunnel import TunnelHub
from ccattler.engine.auth import redeem_join_token
from ccattler.engine.facts import CcaError, check_value, parse_service
from ccattler.engine.facts.keys import DESIRED_SERVICES, OBSERVED_NODES, PLACEMENTS
from ccattler.engine.pki import NODE_LIFETIME, CertificateAuthority, PkiError, cert_pem
from ccattler.engine.pki.ca import csr_key
from ccattler.engine.secrets import KeyProvider, reveal_secret
from ccattler.engine.store import Compare, LeaseNotFound, Store

NODE_TTL = 15.0
_TTL_RANGE = (3.0, 300.0)


def _json_object(text: str, what: str) -> dict[str, Any]:
    value = load_object(text, what)
    check_value(value)
    return value


def _node_name(name: str) -> str:
    try:
        parse_service(name)
    except CcaError as exc:
        raise BadRequest(f"node name: {exc}") from None
    if "/" in name:
        raise BadRequest(f"node name {name!r} must not contain '/'")
    return name


class AgentService(IdentityCalls):
    """ccattler.v1.Agent; every call but Join needs a node certificate."""


    def __init__(self, store: Store, ca: CertificateAuthority, keys: KeyProvider) -> None:
        self.store, self.ca, self.keys = store, ca, keys
        self.slices = SliceHub(store)  # one store watch for every node's WatchSlice
        # Logs and exec sessions down the nodes' own streams, opened on demand through the slice.
        self.tunnels = TunnelHub(summon=self.slices.summon)
        # node → (lease, TTL) this server registered it under: a re-registration of the same
        # document under a live lease of the same TTL keeps that lease and writes nothing.
        self._registered: dict[str, tuple[int, float]] = {}
        self._verified: dict[str, float] = {}  # node → when a beat last checked its document

    #: Reads an agent repeats on a timer: recorded when what they deliver changes (calls.py).
    AUDIT_COALESCED = frozenset({"FetchSecrets"})

    def audit_object(self, method: str, request: Any) -> str | None:
        if method == "Join":
            return f"node {request.node}"
        if method == "FetchSecrets" and request.instances:
            shown = ", ".join(request.instances[:10])
            more = f" and {len(request.instances) - 10} more" if len(request.instances) > 10 else ""
            return f"secrets of instances {shown}{more}"
        if method == "FetchSecrets":
            return f"secrets of instance {request.instance}"
        if method == "RenewCert":
            return "certificate node"
        if method == "IssueIdentity":
            return identity_summary(request)
        return None

    def _node(self, call: Call) -> str:
        if call.principal is None or call.principal.kind != "node":
            raise Forbidden("agent calls need a node certificate (from `cca join`)")
        return call.principal.name

    def _certificate(self, cert: Any) -> api_pb2.Certificate:
        return api_pb2.Certificate(cert=cert_pem(cert), ca=cert_pem(self.ca.cert),
                                   expires=cert.not_valid_after_utc.timestamp())

    def _sign(self, csr: bytes, **kwargs: Any) -> api_pb2.Certificate:
        try:
            return self._certificate(self.ca.sign_csr(csr, **kwargs))
        except PkiError as exc:
            raise BadRequest(str(exc)) from None

    def Join(self, request: api_pb2.JoinRequest, call: Call) -> api_pb2.Certificate:
        node = _node_name(request.node)
        try:
            csr_key(request.csr)  # check all the CA checks before spending the single-use token
        except PkiError as exc:
            raise BadRequest(str(exc)) from None
        if self.store.get(f"{OBSERVED_NODES}{node}") is not None:  # no taking over a live node's name
            raise Conflict(f"node {node} is registered and alive; choose another name, or wait for its "
                           "lease to expire")
        redeem_join_token(self.store, request.token)
        return self._sign(request.csr, name=node, kind="node", lifetime=NODE_LIFETIME)

    def RenewCert(self, request: api_pb2.CsrRequest, call: Call) -> api_pb2.Certificate:
        return self._sign(request.csr, name=self._node(call), kind="node", lifetime=NODE_LIFETIME)

    def _own_instance(self, node: str, ref: str) -> tuple[str, str]:
        parsed = parse_service(ref)
        placement = self.store.get(f"{PLACEMENTS}{parsed.tenant}/{parsed.name}")
        if placement is None or placement.value.get("node") != node:
            raise Forbidden(f"instance {parsed.full} is not placed on node {node}")
        return parsed.tenant, parsed.name

    def _service_of(self, tenant: str, instance: str) -> str:
        placement = self.store.get(f"{PLACEMENTS}{tenant}/{instance}")
        service = (placement.value.get("service") or "") if placement else ""
        if not service.startswith(f"{tenant}/"):
            raise NotFound(f"instance {tenant}/{instance} has no service")
        return service.split("/", 1)[1]

    def RegisterNode(self, request: api_pb2.RegisterRequest, call: Call) -> api_pb2.Lease:
        node = self._node(call)
        document = _json_object(request.node_json, "node_json")
        ttl = request.ttl_seconds or NODE_TTL
        if not _TTL_RANGE[0] <= ttl <= _TTL_RANGE[1]:
            raise BadRequest(f"ttl_seconds must be between {_TTL_RANGE[0]:g} and {_TTL_RANGE[1]:g}")
        previous = self.store.get(f"{OBSERVED_NODES}{node}")
        if previous is not None and previous.value == document and previous.lease and \
                self._registered.get(node) == (previous.lease, ttl):
            # Nothing changed (an agent whose heartbeat broke, or that restarted, while its lease
            # lived): renew that lease instead of rewriting the node's document under a new one —
            # no store write, no event to the runner and the watches.
            try:
                self.store.lease_keepalive(previous.lease)
                return api_pb2.Lease(lease=previous.lease, ttl_seconds=ttl)
            except LeaseNotFound:
                pass  # it expired meanwhile: register anew
        lease = self.store.lease_grant(ttl)
        self.store.put(f"{OBSERVED_NODES}{node}", document, lease=lease)
        self._registered[node] = (lease, ttl)
        if previous is not None and previous.lease and previous.lease != lease:
            try:  # a re-registering agent: its old lease holds nothing now
                self.store.lease_revoke(previous.lease)
            except LeaseNotFound:
                pass
        return api_pb2.Lease(lease=lease, ttl_seconds=ttl)

    async def Heartbeat(self, requests: AsyncIterator[api_pb2.HeartbeatRequest], call: Call
                        ) -> AsyncIterator[api_pb2.HeartbeatReply]:
        """A coroutine: the loop reads the beats; a beat that may wait on the store runs in a thread."""
        node = self._node(call)
        inline = not getattr(self.store, "keepalive_may_block", True)
        async for beat in requests:
            verify = self._needs_read(node, beat.lease)
            if inline and not verify:
                # Nothing here waits: at 1,000 nodes (200 beats a second) the hop to a thread and
                # back was a large part of the idle server's CPU.
                yield self._beat(node, beat.lease, verify)
            else:
                yield await asyncio.to_thread(self._beat, node, beat.lease, verify)
        # The stream ended: keep nothing alive; the lease runs out and the node's facts vanish.

    def _needs_read(self, node: str, lease: int) -> bool:
        # The lease this server registered the node under needs a store read once a TTL only (a
        # read waits behind the runner's range reads: at 1,000 nodes that delayed beats past their
        # leases); any other (registered through another server) is checked on every beat.
        registered, ttl = self._registered.get(node, (None, 0.0))
        return registered != lease or time.monotonic() - self._verified.get(node, 0.0) > ttl

    def _beat(self, node: str, lease: int, verify: bool) -> api_pb2.HeartbeatReply:
        if verify:
            fact = self.store.get(f"{OBSERVED_NODES}{node}")
            if fact is None or fact.lease != lease:
                raise NotFound(f"lease {lease} does not hold node {node}; register again")
            self._verified[node] = time.monotonic()
        try:
            revision = self.store.lease_keepalive(lease)
        except LeaseNotFound:
            raise NotFound(f"lease {lease} of node {node} expired; register again") from None
        return api_pb2.HeartbeatReply(revision=revision)

    async def WatchSlice(self, request: api_pb2.WatchRequest, call: Call) -> AsyncIterator[bytes]:
        """A coroutine (engine/api/aio_server.py): a thousand idle watches hold no thread."""
        node = self._node(call)
        async for batch in self.slices.abatches(node, request.from_revision):
            yield batch_message(batch)  # already serialized: sent as is

    def Report(self, request: api_pb2.ReportRequest, call: Call) -> api_pb2.Json:
        node = self._node(call)
        puts, deletes, compares = [], [], []
        keys = [obs.key for obs in request.observations if obs.key]
        currents = self.store.get_many(keys)
        view = report_view(self.store, keys, currents)  # placement decides: engine/api/report_scope.py
        for obs in request.observations:
            current = currents.get(obs.key)
            value = _json_object(obs.value_json, f"value of {obs.key}") if obs.value_json else None
            check_report(node, obs.key, value, view)
            compares.append(Compare(obs.key, current.mod_revision if current else 0))
            if value is not None:
                puts.append((obs.key, value))
            else:
                deletes.append(obs.key)
        ok, revision = self.store.txn(compares, puts, deletes)
        if not ok:
            raise Conflict("observed facts changed concurrently; report again")
        return api_pb2.Json(json=json.dumps({"revision": revision, "written": len(puts) + len(deletes)}))

    def FetchSecrets(self, request: api_pb2.SecretsRequest, call: Call) -> api_pb2.Secrets:
        node = self._node(call)
        if not request.instances:
            return api_pb2.Secrets(secrets=self._secrets(node, request.instance))
        if len(request.instances) > MAX_SECRET_BATCH:
            raise BadRequest(f"FetchSecrets: {len(request.instances)} instances in one request; "
                             f"at most {MAX_SECRET_BATCH}")
        answers = []
        for ref in request.instances:  # one refused instance (moved away meanwhile) spoils no other
            try:
                answers.append(api_pb2.InstanceSecrets(instance=ref, secrets=self._secrets(node, ref)))
            except CcaError as exc:
                answers.append(api_pb2.InstanceSecrets(instance=ref, error=str(exc)))
        return api_pb2.Secrets(instances=answers)

    def _secrets(self, node: str, instance_ref: str) -> list[api_pb2.SecretValue]:
        """The instance's secrets and connections, if it is placed on `node`."""
        tenant, instance = self._own_instance(node, instance_ref)
        service = self._service_of(tenant, instance)
        spec = self.store.get(f"{DESIRED_SERVICES}{tenant}/{service}")
        if spec is None:
            raise NotFound(f"service {tenant}/{service} is not declared")
        values = []
        for ref in spec.value.get("secrets", []):
            plaintext = reveal_secret(self.store, self.keys, ref["name"])
            if plaintext is None:
                raise NotFound(f"secret {ref['name']} has no value yet (cca secret set {ref['name']})")
            mount = ref.get("mount") or ""
            values.append(api_pb2.SecretValue(name=ref["name"], value=plaintext, mount=mount))
        for name, url, mount in connection_files(self.store, self.keys, spec.value):
            values.append(api_pb2.SecretValue(name=name, value=url, mount=mount))
        return values

    async def Tunnel(self, ups: AsyncIterator[api_pb2.TunnelUp], call: Call
                     ) -> AsyncIterator[api_pb2.TunnelDown]:
        """A coroutine: an open tunnel holds no server thread."""
        async for down in self.tunnels.serve(self._node(call), ups):
            yield down
