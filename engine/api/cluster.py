"""The user-facing calls (ccattler.v1.Cluster): apply, diff, delete, get, watch, status, policy,
secrets, tokens, users and audit. The server authenticates; admission (`engine.admission`) decides
what the principal may do and makes the one atomic commit; every answer is JSON text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any

from ccattler.engine import admission
from ccattler.engine.admission.capabilities import OBJECT_CAPABILITY_KIND, ref_for
from ccattler.engine.admission.model import Denied, ObjectRef, Principal
from ccattler.engine.api import audit, views
from ccattler.engine.api.calls import Call
from ccattler.engine.api.errors import BadRequest, FellBehind, NotFound
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.node_calls import NodeCalls, intent_summary
from ccattler.engine.api.read_access import ReadAccess
from ccattler.engine.api.rollout_calls import RolloutCalls, rollout_summary
from ccattler.engine.api.sources import wire_sources
from ccattler.engine.api.tunnel import TunnelHub
from ccattler.engine.api.workload_calls import WorkloadCalls
from ccattler.engine.auth import (
    DEFAULT_JOIN_TTL,
    DEFAULT_USER_TTL,
    MAX_TTL,
    create_token,
    create_user,
    delete_user,
    get_user,
    list_tokens,
    list_users,
    revoke_token,
)
from ccattler.engine.facts import DEFAULT_TENANT, NAMESPACED_KINDS, parse_service
from ccattler.engine.facts.keys import AUDIT, AUTH, DERIVED, DESIRED, INTENT, LEADER, OBSERVED, SECRETS
from ccattler.engine.facts.read_guards import ReadGuard, prefix_guard
from ccattler.engine.secrets import KeyProvider, delete_secret, list_secrets, rotate_secret, set_secret
from ccattler.engine.store import Store
from ccattler.engine.store.queue_watch import behind

#: Roots a watch prefix may start with (what each key needs: engine/facts/keys.py READ_GUARDS).
_WATCH_ROOTS = (DESIRED, DERIVED, OBSERVED, AUDIT, LEADER, INTENT, SECRETS, AUTH)
_ADMIN = ReadGuard("cluster", None)
_STATE_ROOTS = (DESIRED, DERIVED, OBSERVED)
_AUDITED = {"Apply", "Delete", "PolicyApply", "PolicyDelete", "SecretSet", "SecretDelete", "SecretRotate",
            "TokenCreate", "TokenRevoke", "UserCreate", "UserDelete", "UserToken"}


def _json(value: Any) -> api_pb2.Json:
    return api_pb2.Json(json=json.dumps(_plain(value), default=str))


def _plain(value: Any) -> Any:
    """Dataclasses (results, denials, refs) as JSON-ready values."""
    if is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
        if isinstance(value, ObjectRef):
            out["display"] = str(value)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _tenant(request: Any) -> str:
    tenant = request.tenant or DEFAULT_TENANT
    parse_service("x", tenant)  # checks the tenant name
    return tenant


class ClusterService(WorkloadCalls, NodeCalls, RolloutCalls):
    """ccattler.v1.Cluster over one store."""

    def __init__(self, store: Store, keys: KeyProvider, tunnels: TunnelHub | None = None,
                 watch_max_bytes: int = 8 * 1024 * 1024) -> None:
        self.store, self.keys = store, keys
        self.watch_max_bytes = watch_max_bytes  # queued bytes per Watch stream before it is dropped
        self.tunnels = tunnels or TunnelHub()  # the agents' tunnels (AgentService holds the same)

    def audit_object(self, method: str, request: Any) -> str | None:
        """What a security-relevant call acts on, for its audit record (None: not audited)."""
        if method == "Exec":
            return f"exec in {request.tenant + '/' if request.tenant else ''}{request.instance}: " + \
                " ".join(request.command)
        if method == "Scale":
            tenant = request.tenant + "/" if request.tenant else ""
            return f"scale {tenant}{request.service} to {request.instances}"
        if method == "MetricSet":
            return f"metric {request.name} of {request.service}"
        if method == "NodeIntent":
            return intent_summary(request)
        if method == "Rollout":
            return rollout_summary(request) if request.action == "undo" else None
        if method not in _AUDITED:
            return None
        if method in ("Apply", "Delete") and len(getattr(request, "sources", ())) > 0:
            return audit.summarise_files([s.path for s in request.sources])
        if method == "Apply":
            return "no files"
        if method == "Delete":
            return f"{request.kind} {request.name}"
        if method == "TokenCreate":
            return "join token"
        if method == "TokenRevoke":
            return f"token {request.id}"
        noun = method.removeprefix("Policy").removeprefix("Secret").removeprefix("User")
        noun = method[:len(method) - len(noun)].lower() or method.lower()
        tenant = getattr(request, "tenant", "")
        return f"{noun} {tenant + '/' if tenant and '/' not in request.name else ''}{request.name}"

    # --- authorization -------------------------------------------------------------------------

    def _allow(self, call: Call, capability: str, resource: str | None = None) -> None:
        """Raise `Denied` unless admission lets the caller use `capability` on `resource`
        (`tenant/name`, `tenant/*`, or None for cluster-wide)."""
        assert call.principal is not None
        decision = admission.authorize(self.store, call.principal, capability, resource)
        if not decision:
            raise Denied(decision.denials)

    def _allow_tenant(self, call: Call, capability: str, tenant: str | None) -> None:
        """One tenant's rows need `capability` there; every tenant's (None) are filtered row by row."""
        if tenant is not None:
            self._allow(call, capability, _scope(tenant))

    # --- health and status -----------------------------------------------------------------------

    def Health(self, request: api_pb2.Empty, call: Call) -> api_pb2.Json:
        return _json({"ok": True, "revision": self.store.revision()})

    def Status(self, request: api_pb2.Empty, call: Call) -> api_pb2.Json:
        # The admin reads it as node and cluster status, which operator policies never judge
        # (break-glass: `cca status` and `cca up`'s readiness check work under a deny-all policy).
        admin = call.principal is not None and call.principal.kind == "admin"
        self._allow(call, "node.read" if admin else "service.read")
        return _json(views.status(self.store))

    # --- apply path ------------------------------------------------------------------------------

    def Apply(self, request: api_pb2.ApplyRequest, call: Call) -> api_pb2.Json:
        sources, reader = wire_sources(request)
        result = admission.apply_sources(self.store, call.principal, sources, tenant=_tenant(request),
                                         dry_run=request.dry_run, reader=reader)
        return _json(result)

    def Diff(self, request: api_pb2.ApplyRequest, call: Call) -> api_pb2.Json:
        sources, reader = wire_sources(request)
        diff = admission.diff_sources(self.store, call.principal, sources, tenant=_tenant(request),
                                      reader=reader)
        from ccattler.engine.api.netpolicy import diff_connections

        return _json(_plain(diff) | {"connections": diff_connections(self.store, diff)})

    def Delete(self, request: api_pb2.DeleteRequest, call: Call) -> api_pb2.Json:
        tenant = _tenant(request)
        if request.sources:
            sources, reader = wire_sources(request)
            result = admission.delete_sources(self.store, call.principal, sources, tenant=tenant,
                                              reader=reader)
        else:
            if not request.kind or not request.name:
                raise BadRequest("delete needs KIND NAME or files")
            result = admission.delete_objects(self.store, call.principal, request.kind, request.name,
                                              tenant=tenant)
        return _json(result)

    def Plan(self, request: api_pb2.ApplyRequest, call: Call) -> api_pb2.Json:
        from ccattler.engine.api.planning import plan_live

        self._allow(call, "service.read")
        sources, reader = wire_sources(request)
        return _json(plan_live(self.store, sources, _tenant(request), reader))

    def Explain(self, request: api_pb2.ExplainRequest, call: Call) -> api_pb2.Json:
        from ccattler.engine.api.planning import explain_live

        if not request.target:
            raise BadRequest("explain needs a service or instance name")
        # A bare name is the caller's tenant's (--tenant), never resolved elsewhere: what is
        # authorized is exactly what is explained.
        target = parse_service(request.target, _tenant(request))
        self._allow(call, "service.read", target.full)
        return _json(explain_live(self.store, target.full))

    def ExplainNetwork(self, request: api_pb2.ExplainNetworkRequest, call: Call) -> api_pb2.Json:
        from ccattler.engine.api.netpolicy import explain_network_live
        from ccattler.engine.netpolicy import parse_endpoint

        if not request.destination:
            raise BadRequest("explain connection|service needs a destination service")
        # The answer shows rules of both ends: the caller reads both services.
        for end in (request.destination, request.source):
            if end:
                self._allow(call, "service.read", parse_endpoint(end, _tenant(request))[0])
        seen: dict[str, bool] = {}

        def visible(service: str) -> bool:  # sources named by `explain service` need read too
            if service not in seen:
                seen[service] = bool(admission.authorize(self.store, call.principal, "service.read", service))
            return seen[service]
        return _json(explain_network_live(self.store, request.kind, request.source, request.destination,
                                          _tenant(request), visible))

    # --- reading ---------------------------------------------------------------------------------

    def Get(self, request: api_pb2.GetRequest, call: Call) -> api_pb2.Json:
        """One tenant's rows need the kind's read capability there (PERMISSION_DENIED otherwise);
        `-A` lists what the caller may read (each row judged by its key, engine/api/read_access.py)."""
        kind = views.view_kind(request.kind)
        tenant = None if request.all_tenants else _tenant(request)
        if "/" in request.name and not request.tenant and not request.all_tenants:
            tenant = parse_service(request.name).tenant  # `get services payments/checkout`
        tags = dict(request.tags)
        access = ReadAccess(self.store, call.principal)
        if kind == "services":
            self._allow_tenant(call, "service.read", tenant)
            rows = views.services(self.store, tenant, tags)
        elif kind == "instances":
            self._allow_tenant(call, "service.read", tenant)
            rows = views.instances(self.store, tenant)
        elif kind == "nodes":
            self._allow(call, "node.read")
            rows = views.nodes(self.store)
        elif kind == "secrets":
            self._allow_tenant(call, "secret.read", tenant)
            rows = views.secrets(self.store, tenant)
        elif kind == "policies":
            self._allow(call, "policy.read")
            rows = views.policies(self.store)
        elif kind == "events":  # every tenant's changes, each shown only to who may read its key
            rows = views.events(self.store)
        elif kind == "tenant":
            self._allow(call, "tenant.read")
            rows = views.tenants(self.store)
        else:
            capability = OBJECT_CAPABILITY_KIND[kind]
            if tenant or kind not in NAMESPACED_KINDS:
                self._allow(call, f"{capability}.read", _scope(tenant) if kind in NAMESPACED_KINDS else None)
            rows = views.documents(self.store, kind, tenant, tags)
        rows = [r for r in rows if access.may_read(_guarded_key(r["key"]))]
        if request.name:
            rows = _named(rows, request.name)
            if not rows:
                raise NotFound(f"{kind.removesuffix('s')} {request.name!r} not found")
        return _json({"kind": kind, "revision": self.store.revision(), "items": rows})

    def Watch(self, request: api_pb2.WatchRequest, call: Call) -> Iterator[api_pb2.Event]:
        """Events under a prefix; an empty prefix means all of desired/, derived/ and observed/
        (cluster.admin). A prefix with one guard (one kind and tenant, `audit/`…) is authorized
        up front and again as the stream goes on; a wider one streams only the keys the caller
        may read (`read_guard` of each key). A client that reads too slowly (`watch_max_bytes`
        queued) is dropped with RESOURCE_EXHAUSTED naming the last revision it got, and resumes
        from there."""
        prefix = request.prefix
        access = ReadAccess(self.store, call.principal)
        whole = self._watch_guard(access, prefix)
        with self.store.watch(prefix, request.from_revision or None, self.watch_max_bytes) as watch:
            while call.context.is_active():
                event = watch.get(timeout=1.0)
                if event is not None and (detail := behind(event)) is not None:
                    raise FellBehind(detail["last_revision"], detail["queued_bytes"], detail["max_bytes"])
                if event is None:
                    continue
                if event.kind != "resync":
                    if not prefix and not event.key.startswith(_STATE_ROOTS):
                        continue
                    access.noticed(event.key)
                    if whole is not None:
                        access.require(whole)  # a reader whose role was revoked is cut off
                    elif not access.may_read(event.key):
                        continue
                yield api_pb2.Event(kind=event.kind, key=event.key, revision=event.revision,
                                    value_json="" if event.value is None else json.dumps(event.value))

    def _watch_guard(self, access: ReadAccess, prefix: str) -> ReadGuard | None:
        """Check `prefix`; authorize it when one guard covers it (returned), else None."""
        if not prefix:
            access.require(_ADMIN)
            return _ADMIN
        if not prefix.startswith(_WATCH_ROOTS):
            raise BadRequest(f"watch prefix must start with one of {', '.join(_WATCH_ROOTS)}; got {prefix!r}")
        parts = prefix.split("/")
        if parts[0] == "desired" and len(parts) > 2 and parts[1] not in OBJECT_CAPABILITY_KIND:
            raise BadRequest(f"unknown kind {parts[1]!r} in watch prefix {prefix!r}")
        guard = prefix_guard(prefix)
        if guard is not None:
            access.require(guard)
        return guard

    # --- policies --------------------------------------------------------------------------------

    def PolicyApply(self, request: api_pb2.PolicyRequest, call: Call) -> api_pb2.Json:
        return _json(admission.apply_policy(self.store, call.principal, request.name, request.text))

    def PolicyList(self, request: api_pb2.Empty, call: Call) -> api_pb2.Json:
        self._allow(call, "policy.read")
        return _json({"items": views.policies(self.store)})

    def PolicyDelete(self, request: api_pb2.PolicyRequest, call: Call) -> api_pb2.Json:
        return _json(admission.delete_policy(self.store, call.principal, request.name))

    # --- secrets ---------------------------------------------------------------------------------

    def _secret_ref(self, request: api_pb2.SecretRequest) -> ObjectRef:
        if not request.name:
            raise BadRequest("secret name is empty")
        return ref_for("secret", request.name, _tenant(request))

    def SecretSet(self, request: api_pb2.SecretRequest, call: Call) -> api_pb2.Json:
        ref = self._secret_ref(request)
        verb = "update" if self.store.get(f"{SECRETS}{ref.full_name}") else "create"
        self._allow(call, f"secret.{verb}", ref.full_name)
        info = set_secret(self.store, self.keys, ref.full_name, ref.tenant or "", request.value)
        return _json(info.to_json())

    def SecretList(self, request: api_pb2.SecretRequest, call: Call) -> api_pb2.Json:
        tenant = None if request.name == "*" else _tenant(request)
        self._allow_tenant(call, "secret.read", tenant)
        access = ReadAccess(self.store, call.principal)
        return _json({"items": [r for r in views.secrets(self.store, tenant)
                                if access.may_read(_guarded_key(r["key"]))]})

    def SecretDelete(self, request: api_pb2.SecretRequest, call: Call) -> api_pb2.Json:
        ref = self._secret_ref(request)
        self._allow(call, "secret.delete", ref.full_name)
        if not delete_secret(self.store, ref.full_name, ref.tenant or ""):
            raise NotFound(f"secret {ref.full_name} has no value")
        return _json({"deleted": ref.full_name})

    def SecretRotate(self, request: api_pb2.SecretRequest, call: Call) -> api_pb2.Json:
        """Re-encrypt one secret, or with name `*` every secret of the tenant (`**`: all tenants),
        under a fresh data key and the current master key."""
        if request.name in ("*", "**"):
            tenant = None if request.name == "**" else _tenant(request)
            secrets = list_secrets(self.store, tenant)
            for info in secrets:  # every permission first: a denial rotates nothing
                self._allow(call, "secret.update", info.name)
            rotated = [rotate_secret(self.store, self.keys, info.name, "").to_json() for info in secrets]
            return _json({"items": rotated, "key_id": self.keys.key_id})
        ref = self._secret_ref(request)
        self._allow(call, "secret.update", ref.full_name)
        return _json(rotate_secret(self.store, self.keys, ref.full_name, ref.tenant or "").to_json())

    # --- tokens and users ------------------------------------------------------------------------

    def TokenCreate(self, request: api_pb2.TokenRequest, call: Call) -> api_pb2.Token:
        self._allow(call, "node.create")
        token, record = create_token(self.store, "join", _ttl(request.ttl_seconds, DEFAULT_JOIN_TTL),
                                     by=_who(call.principal))
        return api_pb2.Token(token=token, id=record.id, expires=record.expires)

    def TokenList(self, request: api_pb2.Empty, call: Call) -> api_pb2.Json:
        self._allow(call, "cluster.admin")
        return _json({"items": list_tokens(self.store)})

    def TokenRevoke(self, request: api_pb2.TokenRequest, call: Call) -> api_pb2.Json:
        self._allow(call, "cluster.admin")
        if not revoke_token(self.store, request.id):
            raise NotFound(f"token {request.id} does not exist (expired tokens stay listed until revoked)")
        return _json({"revoked": request.id})

    def UserCreate(self, request: api_pb2.UserRequest, call: Call) -> api_pb2.Json:
        self._allow(call, "cluster.admin")
        user = create_user(self.store, request.name, request.team or None, tuple(request.groups))
        return _json(user.to_json())

    def UserList(self, request: api_pb2.Empty, call: Call) -> api_pb2.Json:
        self._allow(call, "cluster.admin")
        return _json({"items": [u.to_json() for u in list_users(self.store)]})

    def UserDelete(self, request: api_pb2.UserRequest, call: Call) -> api_pb2.Json:
        self._allow(call, "cluster.admin")
        if not delete_user(self.store, request.name):
            raise NotFound(f"user {request.name} does not exist")
        return _json({"deleted": request.name})

    def UserToken(self, request: api_pb2.UserRequest, call: Call) -> api_pb2.Token:
        principal = call.principal
        if not (principal and principal.kind == "user" and principal.name == request.name):
            self._allow(call, "cluster.admin")
        if get_user(self.store, request.name) is None:
            raise NotFound(f"user {request.name} does not exist (cca user create {request.name})")
        token, record = create_token(self.store, "user", _ttl(request.ttl_seconds, DEFAULT_USER_TTL),
                                     user=request.name, by=_who(principal))
        return api_pb2.Token(token=token, id=record.id, expires=record.expires)

    def Audit(self, request: api_pb2.AuditRequest, call: Call) -> api_pb2.Json:
        self._allow(call, "audit.read")
        return _json({"items": audit.recent(self.store, request.limit or 100)})


def _ttl(asked: float, default: float) -> float:
    """A token lifetime: 0 means the default; otherwise at least a second, at most `MAX_TTL`."""
    ttl = asked or default
    if not 1.0 <= ttl <= MAX_TTL:
        raise BadRequest(f"ttl_seconds {asked:g} is out of range: 1 second to {int(MAX_TTL // 86400)} days")
    return ttl


def _scope(tenant: str | None) -> str | None:
    """The resource that stands for every object of `tenant` (None: cluster-wide)."""
    return f"{tenant}/*" if tenant else None


def _guarded_key(key: str) -> str:
    """The key a row's visibility follows: a secret's row (metadata) follows its declaration."""
    return DESIRED + key if key.startswith(SECRETS) else key


def _named(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The rows called `name`; rows without a name (events) match by their key's last segment."""
    def called(row: dict[str, Any]) -> str:
        return row.get("name") or row["key"].rsplit("/", 1)[-1]

    if "/" not in name:
        return [r for r in rows if called(r) == name]
    ref = parse_service(name)
    return [r for r in rows if called(r) == ref.name and r.get("tenant") in (ref.tenant, None)]


def _who(principal: Principal | None) -> str:
    return f"{principal.kind}:{principal.name}" if principal else "anonymous"
