"""What a change to roles, grants or auth groups would confer, so admission.lp can refuse escalation.

Creating or updating a role, a grant or an auth group confers capabilities (in the role's scopes,
or everywhere); the subject must already hold each of them there (as Kubernetes RBAC's
escalation check). Emits `confers(RequestName, Kind, Verb, Scope)`; Scope is a scope path (a
tenant or a path inside it) or `all`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ccattler.engine.admission.capabilities import BadCapability, parse_capability
from ccattler.engine.admission.vocabulary import Facts, Request
from ccattler.engine.facts import display_name
from ccattler.engine.facts.keys import DESIRED_GRANTS, DESIRED_ROLES
from ccattler.engine.solve import Const


def _role_capabilities(role: Mapping[str, Any] | None) -> Iterator[tuple[str, str, object]]:
    if not role:
        return
    scopes: list[object] = list(role.get("scopes") or ()) or [Const("all")]
    for cap in role.get("allow") or ():
        try:
            kind, verb = parse_capability(cap)
        except BadCapability:
            continue
        for scope in scopes:
            yield kind, verb, scope


def _conferred(request: Request, after: Mapping[str, Mapping[str, Any]]) -> Iterator[tuple[str, str, object]]:
    ref, doc = request.ref, request.new
    if ref is None or doc is None or request.verb not in {"create", "update"}:
        return
    if ref.kind == "role":
        yield from _role_capabilities(doc)
    elif ref.kind == "grant":
        yield from _role_capabilities(after.get(f"{DESIRED_ROLES}{doc['role']}"))
    elif ref.kind == "group" and doc.get("type") == "auth" and ref.tenant is not None:
        names = {ref.full_name, display_name(ref.tenant, ref.name)}
        for key, grant in after.items():
            if key.startswith(DESIRED_GRANTS) and (grant.get("to"), grant.get("subject")) in {
                ("group", name) for name in names
            }:
                yield from _role_capabilities(after.get(f"{DESIRED_ROLES}{grant['role']}"))


def add_conferred(facts: Facts, requests: Iterable[Request], after: Mapping[str, Mapping[str, Any]]) -> None:
    """`confers/4` for every role, grant and auth-group write among `requests`."""
    if not facts.wants("confers", 4):
        return
    for request in requests:
        for kind, verb, scope in sorted(set(_conferred(request, after)), key=str):
            facts.add("confers", request.name, Const(kind), Const(verb), scope)
            add_scope_path(facts, scope)


def add_scope_path(facts: Facts, scope: object) -> None:
    """`scope_path(Scope, Prefix)` for each path prefix of a conferred scope string ("team",
    "team/payments" for "team/payments"): a role scoped to a prefix holds it."""
    if isinstance(scope, str):
        parts = scope.split("/")
        for end in range(1, len(parts) + 1):
            facts.add("scope_path", scope, "/".join(parts[:end]))
