"""The admission vocabulary: one request and the cluster's auth/quota documents as typed clingo facts.

Every predicate built here is documented in rules/admission.lp's contract and in rules/README.md
("admission"); `VOCABULARY` lists them so operator policies can be checked against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from clingo import Function, Number, String, Symbol

from ccattler.engine.admission.capabilities import BadCapability, parse_capability
from ccattler.engine.admission.model import ObjectRef, Principal
from ccattler.engine.facts import CcaError, display_name

MIB = 1024 * 1024
_INT_MAX = 2**31 - 1

#: Every input predicate (name, arity) a policy may read.
VOCABULARY: tuple[tuple[str, int], ...] = (
    ("subject", 1), ("subject_kind", 1), ("subject_attr", 2), ("request", 3),
    ("object_attr", 5), ("resource_attr", 3),
    ("service", 1), ("service_image", 2), ("image_tag", 2), ("image_digest", 2),
    ("service_instances", 2), ("service_cpu", 2), ("service_memory", 2), ("service_port", 3),
    ("service_external", 2), ("service_stateful", 1), ("service_secret", 2), ("service_volume", 2),
    ("service_env", 3),
    ("role_allow", 3), ("role_scope", 2), ("grant", 3), ("group_member", 2),
    ("policy_allow", 3), ("policy_cond", 5), ("policy_operand_attr", 4), ("policy_operand_value", 3),
    ("tenant_quota", 3), ("tenant_service", 6), ("tenant_volume", 4),
)

_OPS = {"==": "eq", "!=": "neq", "in": "in", "not_in": "not_in"}
_QUOTA_MIB = {"memory", "storage"}


@dataclass(frozen=True, slots=True)
class Request:
    """One capability check: `verb` on the object `name` (guarded by capability kind `kind`)."""

    verb: str
    kind: str
    name: str
    ref: ObjectRef | None = None
    old: Mapping[str, Any] | None = None
    new: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        """How a denial names it: `update service payments/checkout`."""
        if self.ref is not None:
            return f"{self.verb} {self.ref}"
        return f"{self.verb} {self.kind} {self.name}".rstrip()


def _fn(name: str, *args: Symbol) -> Symbol:
    return Function(name, list(args))


def _int(value: int, what: str) -> Symbol:
    if not -_INT_MAX <= value <= _INT_MAX:
        raise CcaError(f"{what} = {value} does not fit the 32-bit integers of the logic programs")
    return Number(value)


def _mib(value: int | None) -> int:
    return -(-(value or 0) // MIB)


def subject_facts(principal: Principal) -> Iterator[Symbol]:
    yield _fn("subject", String(principal.name))
    yield _fn("subject_kind", Function(principal.kind))
    yield _fn("subject_attr", String("name"), String(principal.name))
    if principal.team:
        yield _fn("subject_attr", String("team"), String(principal.team))
    for group in principal.groups:
        yield _fn("subject_attr", String("group"), String(group))


def object_attributes(ref: ObjectRef, doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The `resource.*` attributes of one object (team: the owner, else tags.team)."""
    yield "kind", ref.kind
    yield "name", ref.name
    tenant = ref.tenant if ref.tenant is not None else (ref.name if ref.kind == "tenant" else None)
    if tenant is not None:
        yield "tenant", tenant
    tags = doc.get("tags") or {}
    owner = doc.get("owner")
    if owner:
        yield "owner", str(owner)
    team = owner or tags.get("team")
    if team:
        yield "team", str(team)
    for key in sorted(tags):
        yield f"tags.{key}", str(tags[key])


def split_image(image: str) -> tuple[str | None, str | None]:
    """(tag, digest) of an image reference; no tag and no digest means the tag `latest`."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else None
    if tag is None and not digest:
        tag = "latest"
    return tag, digest or None


def service_facts(name: str, doc: Mapping[str, Any]) -> Iterator[Symbol]:
    n = String(name)
    yield _fn("service", n)
    image = str(doc.get("image") or "")
    yield _fn("service_image", n, String(image))
    tag, digest = split_image(image)
    if tag is not None:
        yield _fn("image_tag", n, String(tag))
    if digest is not None:
        yield _fn("image_digest", n, String(digest))
    yield _fn("service_instances", n, _int(int(doc.get("instances") or 0), f"{name} instances"))
    resources = doc.get("resources") or {}
    yield _fn("service_cpu", n, _int(int(resources.get("cpu") or 0), f"{name} cpu"))
    yield _fn("service_memory", n, _int(_mib(resources.get("memory")), f"{name} memory (MiB)"))
    for expose in doc.get("expose") or ():
        port = Number(int(expose["port"]))
        yield _fn("service_port", n, port, String(str(expose.get("protocol") or "tcp")))
        if expose.get("external"):
            yield _fn("service_external", n, port)
    if doc.get("stateful"):
        yield _fn("service_stateful", n)
    for secret in doc.get("secrets") or ():
        yield _fn("service_secret", n, String(secret["name"]))
    for volume in doc.get("volumes") or ():
        yield _fn("service_volume", n, String(volume["name"]))
    for key, value in sorted((doc.get("env") or {}).items()):
        yield _fn("service_env", n, String(key), String(str(value)))


def request_facts(requests: Iterable[Request]) -> Iterator[Symbol]:
    """request/3, object_attr/5 and resource_attr/3 for each request, service facts for services."""
    for req in requests:
        name, kind = String(req.name), Function(req.kind)
        yield _fn("request", Function(req.verb), kind, name)
        if req.ref is None:
            continue
        for state, doc in (("old", req.old), ("new", req.new)):
            if doc is None:
                continue
            for key, value in object_attributes(req.ref, doc):
                yield _fn("object_attr", Function(state), kind, name, String(key), String(value))
        current = req.new if req.new is not None else req.old
        if current is not None:
            for key, value in object_attributes(req.ref, current):
                yield _fn("resource_attr", name, String(key), String(value))
        if req.ref.kind == "service" and req.new is not None:
            yield from service_facts(req.name, req.new)


def _split_attr(attr: str) -> tuple[str, str] | None:
    side, _, key = attr.partition(".")
    if side not in {"subject", "resource"} or not key:
        return None
    return side, "group" if (side, key) == ("subject", "groups") else key


def auth_facts(docs: Mapping[str, Mapping[str, Any]]) -> Iterator[Symbol]:
    """Roles, scopes, grants, auth groups and ABAC policies from `desired/` documents."""
    for key, doc in docs.items():
        kind = key.split("/", 2)[1]
        if kind == "role":
            role = String(doc["name"])
            for cap in doc.get("allow") or ():
                try:
                    cap_kind, verb = parse_capability(cap)
                except BadCapability:
                    continue  # grants nothing; the compiler rejects these before they are stored
                yield _fn("role_allow", role, Function(cap_kind), Function(verb))
            for scope in doc.get("scopes") or ():
                yield _fn("role_scope", role, String(scope))
        elif kind == "grant":
            yield _fn("grant", String(doc["role"]), Function(doc["to"]), String(doc["subject"]))
        elif kind == "group" and doc.get("type") == "auth":
            names = {f"{doc['tenant']}/{doc['name']}", display_name(doc["tenant"], doc["name"])}
            for group in sorted(names):
                for member in doc.get("members") or ():
                    yield _fn("group_member", String(group), String(member))
        elif kind == "policy":
            yield from _policy_facts(doc)


def _policy_facts(doc: Mapping[str, Any]) -> Iterator[Symbol]:
    policy = String(doc["name"])
    for cap in doc.get("allow") or ():
        try:
            cap_kind, verb = parse_capability(cap)
        except BadCapability:
            continue
        yield _fn("policy_allow", policy, Function(cap_kind), Function(verb))
    for index, cond in enumerate(doc.get("when") or ()):
        attr, op = _split_attr(cond["attr"]), _OPS.get(cond["op"])
        if attr is None or op is None:
            # An unreadable condition can never hold: the policy then denies what it names.
            yield _fn("policy_cond", policy, Number(index), Function("subject"), String("?"), Function("eq"))
            continue
        i = Number(index)
        yield _fn("policy_cond", policy, i, Function(attr[0]), String(attr[1]), Function(op))
        operand = cond["operand"]
        operand_attr = _split_attr(operand) if isinstance(operand, str) else None
        if operand_attr is not None:
            yield _fn("policy_operand_attr", policy, i, Function(operand_attr[0]), String(operand_attr[1]))
            continue
        for value in operand if isinstance(operand, list) else [operand]:
            yield _fn("policy_operand_value", policy, i, String(str(value)))


def quota_facts(
    tenants: Iterable[str], before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]
) -> Iterator[Symbol]:
    """Quotas of `tenants` (as declared after the request) with their services and volumes."""
    for tenant in sorted(set(tenants)):
        quota_doc = after.get(f"desired/tenant/{tenant}") or {}
        limits = {k: v for k, v in (quota_doc.get("quota") or {}).items() if v is not None}
        if not limits:
            continue
        t = String(tenant)
        for resource, limit in sorted(limits.items()):
            amount = int(limit) // MIB if resource in _QUOTA_MIB else int(limit)
            limit_sym = _int(amount, f"tenant {tenant} quota {resource}")
            yield _fn("tenant_quota", t, Function(resource), limit_sym)
        for state, docs in (("old", before), ("new", after)):
            yield from _usage_facts(Function(state), tenant, docs)


def _usage_facts(state: Symbol, tenant: str, docs: Mapping[str, Mapping[str, Any]]) -> Iterator[Symbol]:
    t = String(tenant)
    for key, doc in docs.items():
        if key.startswith(f"desired/service/{tenant}/"):
            resources = doc.get("resources") or {}
            yield _fn(
                "tenant_service", state, t, String(doc["name"]),
                _int(int(doc.get("instances") or 0), f"{key} instances"),
                _int(int(resources.get("cpu") or 0), f"{key} cpu"),
                _int(_mib(resources.get("memory")), f"{key} memory (MiB)"),
            )
        elif key.startswith(f"desired/volume/{tenant}/"):
            size = _int(_mib(doc.get("size")), f"{key} size (MiB)")
            yield _fn("tenant_volume", state, t, String(doc["name"]), size)


def facts_text(symbols: Iterable[Symbol]) -> str:
    """A debug dump for humans (`cca explain`, failing tests): one `fact.` per line."""
    return "".join(f"{sym}.\n" for sym in symbols)

