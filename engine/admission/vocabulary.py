"""The admission vocabulary: one request and the cluster's auth/quota documents as typed clingo facts.

Every predicate built here is documented in rules/admission.lp's contract and in rules/README.md
("admission"); `VOCABULARY` lists them so operator policies can be checked against it. `Facts`
builds only the predicates the loaded programs read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from clingo import Function, Symbol

from ccattler.dsl.limits import DEFAULT_TENANT_INSTANCES
from ccattler.engine.admission.capabilities import BadCapability, parse_capability
from ccattler.engine.admission.model import ObjectRef, Principal
from ccattler.engine.facts import CcaError, display_name, service_doc
from ccattler.engine.facts.keys import DESIRED_GROUPS, DESIRED_SERVICES, DESIRED_TENANTS, DESIRED_VOLUMES
from ccattler.engine.solve import Const, to_symbol

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
    ("tenant_quota", 3), ("tenant_service", 6), ("tenant_volume", 4), ("confers", 4),
    ("scope_path", 2), ("external_claim", 3), ("shared_port", 4), ("shared_group", 2),
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


class Facts:
    """Typed facts grouped by predicate; predicates outside `wanted` (None: all) are never built,
    so a request pays only for what the loaded programs read."""

    def __init__(self, wanted: frozenset[tuple[str, int]] | None = None, *, wire: bool = False) -> None:
        self.wanted = wanted
        self.by_signature: dict[tuple[str, int], list[Symbol]] = {}
        #: With `wire`, each fact also as the typed tree policy workers read (policy_wire.py), built
        #: from the Python values: reading it back out of a clingo symbol costs a foreign call per part.
        self.trees: dict[tuple[str, int], list[Any]] | None = {} if wire else None
        # Names and keys repeat across facts; building a clingo symbol costs a foreign call.
        self._symbols: dict[object, Symbol] = {}

    def wants(self, name: str, arity: int) -> bool:
        return self.wanted is None or (name, arity) in self.wanted

    def _symbol(self, value: object) -> Symbol:
        key = (type(value), value)
        symbol = self._symbols.get(key)
        if symbol is None:
            symbol = self._symbols[key] = to_symbol(value)
        return symbol

    def add(self, name: str, *values: object) -> None:
        """`name(values…)`: str → string, int → number (32-bit checked), `Const` → constant."""
        if self.wants(name, len(values)):
            fact = Function(name, [self._symbol(v) for v in values])
            self.by_signature.setdefault((name, len(values)), []).append(fact)
            if self.trees is not None:
                self.trees.setdefault((name, len(values)), []).append([name, [_tree(v) for v in values]])

    def select(self, signatures: Iterable[tuple[str, int]]) -> list[Symbol]:
        """The facts of `signatures`, in a fixed order."""
        return [s for sig in sorted(set(signatures)) for s in self.by_signature.get(sig, ())]

    def select_trees(self, signatures: Iterable[tuple[str, int]]) -> list[Any] | None:
        """`select` in wire form (None unless built with `wire`)."""
        if self.trees is None:
            return None
        return [t for sig in sorted(set(signatures)) for t in self.trees.get(sig, ())]


def _tree(value: object) -> Any:
    """A Python fact value in policy_wire.py's form (as `to_symbol` would convert it)."""
    if isinstance(value, bool):
        return ["true" if value else "false", []]
    if isinstance(value, (int, str)):
        return value  # range-checked by `to_symbol` when the symbol was built
    if isinstance(value, Const):
        return [value.name, []]
    if isinstance(value, tuple):
        return ["", [_tree(v) for v in value]]
    from ccattler.engine.admission.policy_wire import encode_symbol

    return encode_symbol(to_symbol(value), {})  # a Symbol given as is


def _int(value: object, what: str) -> int:
    number = int(value or 0)  # type: ignore[call-overload]
    if not -_INT_MAX <= number <= _INT_MAX:
        raise CcaError(f"{what} = {number} does not fit the 32-bit integers of the logic programs")
    return number


def _mib(value: int | None) -> int:
    return -(-(value or 0) // MIB)


def add_subject(facts: Facts, principal: Principal) -> None:
    facts.add("subject", principal.name)
    facts.add("subject_kind", Const(principal.kind))
    facts.add("subject_attr", "name", principal.name)
    if principal.team:
        facts.add("subject_attr", "team", principal.team)
    for group in principal.groups:
        facts.add("subject_attr", "group", group)


def object_attributes(ref: ObjectRef, doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The `resource.*` attributes of one object (team: the owner, else tags.team)."""
    yield "kind", ref.kind
    yield "name", ref.name
    tenant = ref.tenant if ref.tenant is not None else (ref.name if ref.kind == "tenant" else None)
    if tenant is not None:
        yield "tenant", tenant
        yield "path", tenant  # every path prefix of the object, for role scopes
        if ref.tenant is not None and ref.name != "*":
            yield "path", f"{tenant}/{ref.name}"
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


def add_service(facts: Facts, name: str, doc: Mapping[str, Any]) -> None:
    facts.add("service", name)
    image = str(doc.get("image") or "")
    facts.add("service_image", name, image)
    tag, digest = split_image(image)
    if tag is not None:
        facts.add("image_tag", name, tag)
    if digest is not None:
        facts.add("image_digest", name, digest)
    facts.add("service_instances", name, _int(doc.get("instances"), f"{name} instances"))
    resources = service_doc.resources(doc)
    facts.add("service_cpu", name, _int(resources.get("cpu"), f"{name} cpu"))
    facts.add("service_memory", name, _int(_mib(resources.get("memory")), f"{name} memory (MiB)"))
    for expose in service_doc.expose(doc):
        port = _int(expose["port"], f"{name} port")
        facts.add("service_port", name, port, str(expose.get("protocol") or "tcp"))
        if expose.get("external"):
            facts.add("service_external", name, port)
    if doc.get("stateful"):
        facts.add("service_stateful", name)
    for secret in service_doc.secrets(doc):
        facts.add("service_secret", name, secret["name"])
    for volume in service_doc.volumes(doc):
        facts.add("service_volume", name, volume["name"])
    for key, value in sorted(service_doc.env(doc).items()):
        facts.add("service_env", name, key, str(value))


def add_requests(facts: Facts, requests: Iterable[Request]) -> None:
    """request/3, object_attr/5 and resource_attr/3 for each request, service facts for services."""
    attrs = facts.wants("object_attr", 5) or facts.wants("resource_attr", 3)
    for req in requests:
        facts.add("request", Const(req.verb), Const(req.kind), req.name)
        if req.ref is None:
            continue
        if attrs:
            for state, doc in (("old", req.old), ("new", req.new)):
                for key, value in object_attributes(req.ref, doc) if doc is not None else ():
                    facts.add("object_attr", Const(state), Const(req.kind), req.name, key, value)
            current = req.new if req.new is not None else req.old
            for key, value in object_attributes(req.ref, current) if current is not None else ():
                facts.add("resource_attr", req.name, key, value)
        if req.ref.kind == "service" and req.new is not None:
            add_service(facts, req.name, req.new)


def _split_attr(attr: str) -> tuple[str, str] | None:
    side, _, key = attr.partition(".")
    if side not in {"subject", "resource"} or not key:
        return None
    return side, "group" if (side, key) == ("subject", "groups") else key


def add_auth(facts: Facts, docs: Mapping[str, Mapping[str, Any]]) -> None:
    """Roles, scopes, grants, auth groups and ABAC policies from `desired/` documents."""
    for key, doc in docs.items():
        kind = key.split("/", 2)[1]
        if kind == "role":
            for cap in doc.get("allow") or ():
                try:
                    cap_kind, verb = parse_capability(cap)
                except BadCapability:
                    continue  # grants nothing; the compiler rejects these before they are stored
                facts.add("role_allow", doc["name"], Const(cap_kind), Const(verb))
            for scope in doc.get("scopes") or ():
                facts.add("role_scope", doc["name"], scope)
        elif kind == "grant":
            facts.add("grant", doc["role"], Const(doc["to"]), doc["subject"])
        elif kind == "group" and doc.get("type") == "auth":
            names = {f"{doc['tenant']}/{doc['name']}", display_name(doc["tenant"], doc["name"])}
            for group in sorted(names):
                for member in doc.get("members") or ():
                    facts.add("group_member", group, member)
        elif kind == "policy":
            _add_policy(facts, doc)


def _add_policy(facts: Facts, doc: Mapping[str, Any]) -> None:
    policy = doc["name"]
    for cap in doc.get("allow") or ():
        try:
            cap_kind, verb = parse_capability(cap)
        except BadCapability:
            continue
        facts.add("policy_allow", policy, Const(cap_kind), Const(verb))
    for index, cond in enumerate(doc.get("when") or ()):
        attr, op = _split_attr(cond["attr"]), _OPS.get(cond["op"])
        if attr is None or op is None:
            # An unreadable condition can never hold: the policy then denies what it names.
            facts.add("policy_cond", policy, index, Const("subject"), "?", Const("eq"))
            continue
        facts.add("policy_cond", policy, index, Const(attr[0]), attr[1], Const(op))
        operand = cond["operand"]
        operand_attr = _split_attr(operand) if isinstance(operand, str) else None
        if operand_attr is not None:
            facts.add("policy_operand_attr", policy, index, Const(operand_attr[0]), operand_attr[1])
            continue
        for value in operand if isinstance(operand, list) else [operand]:
            facts.add("policy_operand_value", policy, index, str(value))


def add_quota(
    facts: Facts, tenants: Iterable[str],
    before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]],
) -> None:
    """Quotas of `tenants` (as declared after the request) with their services and volumes."""
    for tenant in sorted(set(tenants)):
        limits = effective_quota(after.get(f"{DESIRED_TENANTS}{tenant}"))
        for resource, limit in sorted(limits.items()):
            limit = int(limit) // MIB if resource in _QUOTA_MIB else limit
            amount = _int(limit, f"tenant {tenant} quota {resource}")
            facts.add("tenant_quota", tenant, Const(resource), amount)
        if limits:
            _add_usage(facts, Const("old"), tenant, before)
            _add_usage(facts, Const("new"), tenant, after)


def effective_quota(tenant_doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tenant's quota as admission enforces it: what its `tenant` block declares, and
    `limits.DEFAULT_TENANT_INSTANCES` instances when it declares no instance quota (or no block)."""
    declared = (tenant_doc or {}).get("quota") or {}
    limits = {k: v for k, v in declared.items() if v is not None}
    limits.setdefault("instances", DEFAULT_TENANT_INSTANCES)
    return limits


def committed_instances(doc: Mapping[str, Any]) -> int:
    """What a service always runs: its `instances`, or its autoscaling minimum when higher."""
    horizontal = service_doc.horizontal(doc)
    return max(int(doc.get("instances") or 0), int(horizontal.get("min") or 0))


def _add_usage(facts: Facts, state: Const, tenant: str, docs: Mapping[str, Mapping[str, Any]]) -> None:
    services, volumes = f"{DESIRED_SERVICES}{tenant}/", f"{DESIRED_VOLUMES}{tenant}/"
    for key, doc in docs.items():
        if key.startswith(services):
            resources = service_doc.resources(doc)
            facts.add(
                "tenant_service", state, tenant, doc["name"],
                _int(committed_instances(doc), f"{key} instances"),
                _int(resources.get("cpu"), f"{key} cpu"),
                _int(_mib(resources.get("memory")), f"{key} memory (MiB)"),
            )
        elif key.startswith(volumes):
            size = _int(_mib(doc.get("size")), f"{key} size (MiB)")
            facts.add("tenant_volume", state, tenant, doc["name"], size)


def external_ports(doc: Mapping[str, Any] | None) -> set[tuple[int, str]]:
    """(port, l4 protocol) of a service's external exposes (`http` is TCP at the node port)."""
    ports = set()
    for expose in service_doc.expose(doc):
        if isinstance(expose, Mapping) and expose.get("external"):
            protocol = "udp" if expose.get("protocol") == "udp" else "tcp"
            ports.add((_int(expose.get("port"), "external port"), protocol))
    return ports


def add_external_claims(facts: Facts, requests: Iterable[Request],
                        after: Mapping[str, Mapping[str, Any]]) -> None:
    """Who claims the external ports that the services this request creates or updates claim:
    those services and every other service of the cluster on one of those ports (after the request)."""
    wanted: set[tuple[int, str]] = set()
    for req in requests:
        if req.kind == "service" and req.verb in ("create", "update") and req.ref is not None:
            wanted |= external_ports(req.new)
    if not wanted:
        return
    for key, doc in after.items():
        if key.startswith(DESIRED_SERVICES):
            name = key[len(DESIRED_SERVICES):]
            for port, protocol in sorted(external_ports(doc) & wanted):
                facts.add("external_claim", name, port, Const(protocol))


def shares_network(doc: Mapping[str, Any] | None) -> bool:
    """A `share network` service group's document."""
    return bool(doc) and doc.get("type", "service") == "service" and bool(doc.get("share_network"))


def listened_ports(doc: Mapping[str, Any] | None) -> set[tuple[int, str]]:
    """(port, l4 protocol) of every port a service exposes, external or not (`http` is TCP)."""
    ports = set()
    for expose in service_doc.expose(doc):
        if isinstance(expose, Mapping):
            protocol = "udp" if expose.get("protocol") == "udp" else "tcp"
            ports.add((_int(expose.get("port"), "port"), protocol))
    return ports


def shared_groups(after: Mapping[str, Mapping[str, Any]], groups: Iterable[str],
                  services: Iterable[str]) -> set[str]:
    """The `share network` groups ("tenant/name") whose members' ports a request that writes the
    groups `groups` and the services `services` must check: those of `groups` that share their
    network after it, and every one listing one of `services` after it."""
    found = {g for g in groups if shares_network(after.get(f"{DESIRED_GROUPS}{g}"))}
    written = set(services)
    if written:
        for key, doc in after.items():
            members = set(doc.get("services") or ()) if key.startswith(DESIRED_GROUPS) else set()
            if written & members and shares_network(doc):
                found.add(key[len(DESIRED_GROUPS):])
    return found


def group_members(after: Mapping[str, Mapping[str, Any]], group: str) -> tuple[str, ...]:
    """The services ("tenant/name") service group `group` lists, in its order, once each."""
    return tuple(dict.fromkeys((after.get(f"{DESIRED_GROUPS}{group}") or {}).get("services") or ()))


def add_shared_ports(facts: Facts, requests: Iterable[Request],
                     after: Mapping[str, Mapping[str, Any]]) -> None:
    """The ports of every member of each `share network` service group this request creates or
    updates, or one of whose member services it creates or updates (after the request; members
    declared in other files or applied earlier included), and which request writes which group."""
    if not (facts.wants("shared_port", 4) or facts.wants("shared_group", 2)):
        return
    written: set[str] = set()
    groups: set[str] = set()
    for req in requests:
        if req.verb not in ("create", "update") or req.ref is None:
            continue
        if req.ref.kind == "group" and shares_network(req.new):
            groups.add(req.ref.full_name)
            facts.add("shared_group", req.name, req.ref.full_name)
        elif req.ref.kind == "service":
            written.add(req.ref.full_name)
    for group in sorted(shared_groups(after, groups, written)):
        for member in group_members(after, group):
            for port, protocol in sorted(listened_ports(after.get(f"{DESIRED_SERVICES}{member}"))):
                facts.add("shared_port", group, member, port, Const(protocol))
