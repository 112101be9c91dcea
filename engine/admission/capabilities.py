"""Capabilities (`KIND.VERB`) and which capability guards each kind of declared object.

LANGUAGE.md "Authorization" fixes the capability kinds; objects the language has besides them map
onto the capability that guards what they grant (`OBJECT_CAPABILITY_KIND`, documented in
rules/README.md).
"""

from __future__ import annotations

from typing import Any

from ccattler.engine.admission.model import ObjectRef
from ccattler.engine.facts import CLUSTER_KINDS, NAMESPACED_KINDS, CcaError, desired_key, parse_service

CAPABILITY_KINDS = ("service", "secret", "policy", "node", "network", "tenant", "role", "audit")
CRUD_VERBS = ("read", "create", "update", "delete")
#: Capabilities beyond KIND.VERB for the kinds above.
SPECIAL_CAPABILITIES = {("service", "exec"), ("service", "logs"), ("secret", "use"), ("cluster", "admin")}
KIND_ALIASES = {"workload": "service"}

#: Object kind → the capability kind that guards it. Auth groups (`group` with members) are
#: guarded by `role` (membership grants roles); service groups by `service`.
OBJECT_CAPABILITY_KIND = {
    "service": "service",
    "gate": "service",
    "volume": "service",
    "group": "service",
    "connection": "secret",
    "secret": "secret",
    "network": "network",
    "node": "node",
    "tenant": "tenant",
    "role": "role",
    "grant": "role",
    "policy": "policy",
    "lp": "policy",
}

#: Names users type for kinds (`cca delete services web`) → object kinds.
_KIND_WORDS = {kind: kind for kind in OBJECT_CAPABILITY_KIND} | {
    "workload": "service",
    **{f"{kind}s": kind for kind in OBJECT_CAPABILITY_KIND if kind not in {"lp", "policy"}},
    "policies": "policy",
}
KIND_WORDS = frozenset(_KIND_WORDS)


class UnknownKind(CcaError, ValueError):
    """A kind or capability name is not part of the language."""


class BadCapability(CcaError, ValueError):
    """A capability string is not `KIND.VERB` with a known kind and verb."""


def parse_capability(text: str) -> tuple[str, str]:
    """`"workload.update"` → `("service", "update")`; raises `BadCapability` for anything unknown."""
    kind, dot, verb = text.strip().partition(".")
    kind = KIND_ALIASES.get(kind, kind)
    if not dot:
        raise BadCapability(f"capability {text!r} must be KIND.VERB (e.g. service.update)")
    if (kind, verb) in SPECIAL_CAPABILITIES or (kind in CAPABILITY_KINDS and verb in CRUD_VERBS):
        return kind, verb
    known = ", ".join(CAPABILITY_KINDS)
    raise BadCapability(
        f"unknown capability {text!r}: kinds are {known} (verbs read, create, update, delete), "
        "plus service.exec, service.logs, secret.use, cluster.admin"
    )


def object_kind(word: str) -> str:
    """The object kind a user means by `word` (`services`, `workload`, `gate`…)."""
    kind = _KIND_WORDS.get(word.strip().lower())
    if kind is None:
        import difflib

        known = ", ".join(sorted(k for k in OBJECT_CAPABILITY_KIND if k != "lp"))
        close = difflib.get_close_matches(word.strip().lower(), sorted(KIND_WORDS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UnknownKind(f"unknown kind {word!r}; {hint}expected one of {known}")
    return kind


def capability_kind(ref: ObjectRef, doc: dict[str, Any] | None) -> str:
    """The capability kind guarding `ref` (auth groups are guarded as roles)."""
    if ref.kind == "group" and doc is not None and doc.get("type") == "auth":
        return "role"
    return OBJECT_CAPABILITY_KIND[ref.kind]


def ref_from_key(key: str) -> ObjectRef:
    """The object a `desired/...` key names; raises `UnknownKind` for anything else."""
    parts = key.split("/")
    if len(parts) < 3 or parts[0] != "desired":
        raise UnknownKind(f"{key!r} is not a desired/<kind>/… key")
    kind = parts[1]
    if kind in NAMESPACED_KINDS and len(parts) == 4:
        return ObjectRef(kind, parts[2], parts[3], key)
    if kind in CLUSTER_KINDS and len(parts) == 3:
        return ObjectRef(kind, None, parts[2], key)
    raise UnknownKind(f"{key!r} is not a key of a known kind")


def ref_for(kind: str, name: str, tenant: str) -> ObjectRef:
    """The object `name` of `kind`; a bare namespaced name resolves in `tenant`. Checks the name."""
    if kind in NAMESPACED_KINDS:
        service = parse_service(name, tenant)
        return ObjectRef(kind, service.tenant, service.name, desired_key(kind, service.name, service.tenant))
    return ObjectRef(kind, None, name, desired_key(kind, name))
