"""The apply path the API server calls: apply, diff, delete and authorize, each judged by admission.

An apply compiles the sources (syntax, schema, defaults), prunes what those files declared before
and no longer do, is judged by rules/admission.lp and the operator policies, and commits in ONE
transaction guarded by the revisions it read; on a conflict it re-reads and re-judges
(`ATTEMPTS` times) before giving up with a retriable `Conflict`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ccattler.engine.admission.breakglass import break_glass
from ccattler.engine.admission.capabilities import (
    UnknownKind,
    object_kind,
    parse_capability,
    ref_for,
    ref_from_key,
)
from ccattler.engine.admission.evaluate import evaluate, wanted_signatures
from ccattler.engine.admission.model import (
    ApplyResult,
    Conflict,
    Decision,
    Denied,
    Diff,
    ObjectRef,
    PolicyWarning,
    Principal,
)
from ccattler.engine.admission.plan import (
    AUTH_PREFIXES,
    Plan,
    State,
    context_for,
    object_request,
    plan_changes,
    read_state,
    request_name,
)
from ccattler.engine.admission.vocabulary import Facts, Request, add_auth, add_requests, add_subject
from ccattler.engine.facts import DEFAULT_TENANT, CcaError, check_value
from ccattler.engine.facts.keys import DESIRED_LP
from ccattler.engine.store import Store

if TYPE_CHECKING:
    from ccattler.dsl import Reader, Source

ATTEMPTS = 3


class NotFound(CcaError):
    """The named object does not exist."""


def owner_name(source: str, tenant: str) -> str:
    """Who owns what an apply declares: the file, qualified by the apply's tenant when it is not
    the default (`app.cca@payments`), so applying one file into two tenants prunes neither."""
    return source if tenant == DEFAULT_TENANT else f"{source}@{tenant}"


def compile_checked(sources: Sequence[Source], tenant: str, reader: Reader | None) -> dict[str, Any]:
    """The compiled documents of `sources` (DslError passes through), each of a declarable kind,
    owned by `owner_name(file, tenant)`."""
    from ccattler.dsl import compile_sources

    compiled = _checked(compile_sources(list(sources), tenant=tenant, reader=reader))
    for doc in compiled.values():
        doc["source"] = owner_name(doc["source"], tenant)
    return compiled


def _owners(sources: Sequence[Source], tenant: str) -> set[str]:
    return {owner_name(s.name, tenant) for s in sources}


def _checked(docs: Mapping[str, Any]) -> dict[str, Any]:
    """Declared documents, each of a declarable kind, as the store will hold them (canonical JSON,
    so unchanged objects compare equal)."""
    for key in docs:
        if ref_from_key(key).kind == "lp":
            raise UnknownKind(f"{key!r}: .lp policies are applied with `cca policy apply`, not in .cca files")
    return {key: json.loads(check_value(doc)) for key, doc in docs.items()}


def _apply_writes(
    state: State, compiled: Mapping[str, Any], source_names: set[str]
) -> tuple[dict[str, Any], tuple[PolicyWarning, ...]]:
    """The compiled documents plus a deletion for each object those files declared before and no
    longer do; objects of other files are never touched."""
    writes: dict[str, Any] = dict(compiled)
    for key, doc in state.docs.items():
        if key.startswith(DESIRED_LP) or key in compiled:
            continue
        if doc.get("source") in source_names:
            writes[key] = None
    warnings = []
    for key, doc in compiled.items():
        old_source = (state.docs.get(key) or {}).get("source")
        if old_source and old_source != doc.get("source"):
            warnings.append(PolicyWarning(
                "apply", "owner_changed",
                f"{ref_from_key(key)} was declared by {old_source}; it now belongs to {doc.get('source')}",
            ))
    return writes, tuple(warnings)


def _commit(store: Store, plan: Plan, dry_run: bool) -> int | None:
    """The committed revision, the read revision for dry runs and no-ops, None on a conflict."""
    if dry_run or not (plan.puts or plan.deletes):
        return plan.revision
    ok, revision = store.txn(plan.compares, plan.puts, plan.deletes)
    return revision if ok else None


def _result(plan: Plan, revision: int, dry_run: bool) -> ApplyResult:
    return ApplyResult(
        revision=revision,
        added=tuple(c.ref for c in plan.added),
        changed=tuple(c.ref for c in plan.changed),
        removed=tuple(c.ref for c in plan.removed),
        unchanged=plan.unchanged,
        warnings=plan.warnings,
        dry_run=dry_run,
    )


def run_plan(
    store: Store, dry_run: bool, make_plan: Callable[[State], Plan], what: str
) -> ApplyResult:
    for _ in range(ATTEMPTS):
        plan = make_plan(read_state(store))
        if plan.denials:
            raise Denied(plan.denials)
        revision = _commit(store, plan, dry_run)
        if revision is not None:
            return _result(plan, revision, dry_run)
    raise Conflict(f"{what}: the objects kept changing while it was admitted ({ATTEMPTS} attempts); retry")


def _summary(verb: str, sources: Sequence[Source]) -> str:
    return f"{verb} {', '.join(sorted({s.name for s in sources})) or '(no files)'}"


def apply_sources(
    store: Store, principal: Principal, sources: Sequence[Source], *,
    tenant: str = DEFAULT_TENANT, dry_run: bool = False, reader: Reader | None = None,
) -> ApplyResult:
    """Compile, judge and commit `sources` atomically; raises `Denied` (nothing written) or
    `DslError`. Objects these files declared before and no longer do are removed."""
    compiled = compile_checked(sources, tenant, reader)
    return _apply(store, principal, compiled, _owners(sources, tenant), dry_run)


def apply_compiled(
    store: Store, principal: Principal, compiled: Mapping[str, Any], source_names: set[str], *,
    dry_run: bool = False,
) -> ApplyResult:
    """`apply_sources` after compilation: `compiled` is what files `source_names` now declare."""
    return _apply(store, principal, _checked(compiled), source_names, dry_run)


def _apply(
    store: Store, principal: Principal, compiled: Mapping[str, Any], source_names: set[str], dry_run: bool
) -> ApplyResult:
    summary = f"apply {', '.join(sorted(source_names)) or '(no files)'}"

    def make_plan(state: State) -> Plan:
        writes, warnings = _apply_writes(state, compiled, source_names)
        return plan_changes(state, principal, writes, summary, warnings)

    return run_plan(store, dry_run, make_plan, summary)


def diff_sources(
    store: Store, principal: Principal, sources: Sequence[Source], *,
    tenant: str = DEFAULT_TENANT, reader: Reader | None = None,
) -> Diff:
    """What applying `sources` would add, change and remove (with old and new documents), and
    what admission would say. Showing old documents needs read access to them."""
    compiled = compile_checked(sources, tenant, reader)
    state = read_state(store)
    writes, warnings = _apply_writes(state, compiled, _owners(sources, tenant))
    summary = _summary("diff", sources)
    plan = plan_changes(state, principal, writes, summary, warnings)
    reads = [object_request("read", c.ref, c.old, c.old) for c in plan.changed + plan.removed]
    decision = _decide(state, principal, reads, summary)
    if not decision.allowed:
        raise Denied(decision.denials)
    return Diff(plan.revision, plan.added, plan.changed, plan.removed, plan.unchanged,
                plan.denials, plan.warnings)


def delete_objects(
    store: Store, principal: Principal, kind: str, name: str, *,
    tenant: str = DEFAULT_TENANT, dry_run: bool = False,
) -> ApplyResult:
    """Delete one object (`cca delete KIND NAME`); unknown kinds and path-like names are errors."""
    object_ = object_kind(kind)
    if object_ == "lp":
        raise UnknownKind("operator .lp policies are deleted with `cca policy delete`")
    ref = ref_for(object_, name, tenant)

    def make_plan(state: State) -> Plan:
        if ref.key not in state.docs:
            raise NotFound(f"{ref} not found")
        return plan_changes(state, principal, {ref.key: None}, f"delete {ref}")

    return run_plan(store, dry_run, make_plan, f"delete {ref}")


def delete_sources(
    store: Store, principal: Principal, sources: Sequence[Source], *,
    tenant: str = DEFAULT_TENANT, dry_run: bool = False, reader: Reader | None = None,
) -> ApplyResult:
    """Delete every object `sources` declare that exists (`cca delete -f FILE`), atomically."""
    compiled = compile_checked(sources, tenant, reader)
    summary = _summary("delete", sources)

    def make_plan(state: State) -> Plan:
        return plan_changes(state, principal, {k: None for k in compiled if k in state.docs}, summary)

    return run_plan(store, dry_run, make_plan, summary)


#: The object kind a capability kind's resources are (audit and cluster name no object).
_RESOURCE_KIND = {k: k for k in ("service", "secret", "policy", "node", "network", "tenant", "role")}


def _resource_request(verb: str, cap_kind: str, resource: str | None, tenant: str, store: Store) -> Request:
    kind = _RESOURCE_KIND.get(cap_kind)
    if resource is None or kind is None:
        return Request(verb, cap_kind, "")
    if resource.endswith("/*"):  # every object of a tenant: the scope is known, attributes are not
        scope = ref_for("tenant", resource[:-2], tenant)
        ref = ObjectRef(kind, scope.name, "*", "")
        return Request(verb, cap_kind, request_name(ref, cap_kind), ref, None, {})
    ref = ref_for(kind, resource, tenant)
    fact = store.get(ref.key)
    doc = fact.value if fact is not None else {}
    return object_request(verb, ref, None, doc)


def _decide(state: State, principal: Principal, requests: list[Request], summary: str) -> Decision:
    if not requests:
        return Decision(True)
    policies = () if break_glass(principal, requests) else state.policies  # before any worker is asked
    facts = Facts(wanted_signatures(policies), wire=bool(policies))
    add_subject(facts, principal)
    add_requests(facts, requests)
    add_auth(facts, {k: v for k, v in state.docs.items() if k.startswith(AUTH_PREFIXES)})
    verdict = evaluate(facts, policies, context_for(state, principal, requests, summary))
    return Decision(not verdict.denials, verdict.denials, verdict.warnings)


def authorize(
    store: Store, principal: Principal, capability: str, resource: str | None = None, *,
    tenant: str = DEFAULT_TENANT,
) -> Decision:
    """May `principal` use `capability` (`service.exec`, `secret.read`…) on `resource`
    (`tenant/name`, a bare name in `tenant`, `tenant/*`, or None for cluster-wide)?"""
    cap_kind, verb = parse_capability(capability)
    state = read_state(store, (*AUTH_PREFIXES, DESIRED_LP))
    request = _resource_request(verb, cap_kind, resource, tenant, store)
    return _decide(state, principal, [request], f"{capability} {resource or ''}".strip())
