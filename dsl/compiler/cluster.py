"""Compile the cluster-wide blocks: node, tenant, role, policy and grant (docs/facts.md shapes)."""

from __future__ import annotations

import hashlib
import json

from ccattler.dsl import quantities as q
from ccattler.dsl.ast import ListValue, Node, Scalar
from ccattler.dsl.compiler.context import Unit
from ccattler.dsl.errors import did_you_mean
from ccattler.engine.facts import InvalidKey, parse_service

_KINDS = ("service", "secret", "policy", "node", "network", "tenant", "role", "audit")
_VERBS = ("read", "create", "update", "delete")
#: Every capability a role or policy may name (`workload.*` is an alias of `service.*`).
CAPABILITIES = frozenset(
    [f"{k}.{v}" for k in _KINDS for v in _VERBS]
    + ["service.exec", "service.logs", "secret.use", "cluster.admin"]
)
ATTRIBUTES = ("subject.name", "subject.team", "subject.groups", "resource.tenant", "resource.name",
              "resource.owner", "resource.team")


def content_hash(doc: dict) -> str:
    """A short stable key for objects the language does not name (network rules, grants)."""
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def compile_node(u: Unit, block: Node) -> dict:
    f = u.singles(block, f'node "{block.name.value}"', frozenset({"label", "restrict"}))
    labels: dict[str, str] = {}
    for label in block.fields("label"):
        if label.key.value in labels:
            u.error(label.key.span, "duplicate-field", f'label "{label.key.value}" is given twice')
        labels[label.key.value] = label.values[0].value
    capacity = None
    if "capacity" in f:
        cf = u.singles(f["capacity"], "capacity")
        for needed in ("cpu", "memory"):
            if needed not in cf:
                u.error(f["capacity"].keyword_span, "missing-field", f"capacity needs {needed}")
        capacity = {"cpu": u.value(cf.get("cpu"), q.cpu, 0), "memory": u.value(cf.get("memory"), q.size, 0)}
    return {"zone": u.value(f.get("zone")), "architecture": u.value(f.get("architecture")),
            "labels": labels, "restrictions": [r.values[0].value for r in block.fields("restrict")],
            "capacity": capacity}


def compile_tenant(u: Unit, block: Node) -> dict:
    f = u.singles(block, f'tenant "{block.name.value}"')
    quota = {"cpu": None, "memory": None, "instances": None, "volumes": None, "storage": None}
    if "quota" in f:
        qf = u.singles(f["quota"], "quota")
        readers = {"cpu": q.cpu, "memory": q.size, "instances": q.count, "volumes": q.count,
                   "storage": q.size}
        quota = {k: u.value(qf.get(k), r) for k, r in readers.items()}
    if "weight" in f:  # in the language, but nothing would read it: refused rather than ignored
        u.error(f["weight"].keyword_span, "unsupported-field",
                f'tenant "{block.name.value}": weight is not supported yet, it would change nothing',
                "remove it; a tenant's share of the cluster is its quota")
    return {"quota": quota}


def _capability(u: Unit, scalar: Scalar) -> str | None:
    cap = scalar.value
    if cap.startswith("workload."):
        cap = "service." + cap.removeprefix("workload.")
    if cap in CAPABILITIES:
        return cap
    u.error(scalar.span, "unknown-capability", f'unknown capability "{scalar.value}"',
            did_you_mean(cap, CAPABILITIES) or "capabilities are KIND.VERB, e.g. service.read")
    return None


def _scope(u: Unit, scalar: Scalar) -> str | None:
    """A role scope is a tenant or a path inside it (`payments`, `team/payments`): each segment
    a valid name; admission matches it against an object's `tenant/name` by path prefix."""
    try:
        for segment in scalar.value.split("/"):
            parse_service(segment)
    except InvalidKey as exc:
        u.error(scalar.span, "bad-name", f"scope {scalar.value!r}: {exc}",
                "a scope is a tenant or a path inside it, e.g. payments or team/payments")
        return None
    return scalar.value


def compile_role(u: Unit, block: Node) -> dict:
    allow = [c for c in (_capability(u, n.values[0]) for n in block.fields("allow")) if c]
    if not block.fields("allow"):
        u.error(block.name.span, "missing-field", f'role "{block.name.value}" needs at least one allow')
    scopes = [s for s in (_scope(u, f.values[0]) for f in block.fields("scope")) if s]
    return {"allow": sorted(set(allow)), "scopes": sorted(set(scopes))}


def compile_policy(u: Unit, block: Node) -> dict:
    allow = [c for c in (_capability(u, n.values[0]) for n in block.fields("allow")) if c]
    when = [w for w in (_condition(u, n) for n in block.fields("when")) if w]
    return {"allow": sorted(set(allow)), "when": when}


def _attribute_ok(name: str) -> bool:
    return name in ATTRIBUTES or (name.startswith("resource.tags.") and len(name) > len("resource.tags."))


def _condition(u: Unit, node: Node) -> dict | None:
    attr, operand = node.values
    op = node.flags[0]
    ok = True
    if not _attribute_ok(attr.value):
        u.error(attr.span, "unknown-attribute", f'unknown attribute "{attr.value}"',
                did_you_mean(attr.value, ATTRIBUTES) or "attributes are subject.* and resource.*")
        ok = False
    if op in ("in", "not_in"):
        if not isinstance(operand, ListValue):
            u.error(operand.span, "bad-value", f"{op} needs a list, e.g. [a, b]")
            return None
        value: str | list[str] = [i.value for i in operand.items]
    else:
        if isinstance(operand, ListValue):
            u.error(operand.span, "bad-value", f"{op} compares with one value; use in for a list")
            return None
        value = operand.value
    return {"attr": attr.value, "op": op, "operand": value} if ok else None


def compile_grant(u: Unit, block: Node) -> tuple[str, dict] | None:
    role, subject = block.values
    kind = block.flags[-1]
    role_name = u.split_name(role, namespaced=False)
    if not role_name:
        return None
    who = subject.value
    if kind == "service":
        who = u.resolve("service", subject)
        if who is None:
            return None
    doc = {"role": role_name[1], "to": kind, "subject": who}
    return content_hash(doc), doc
