"""Plan one change to the desired state: classify it, build its requests, judge it, guard its commit.

`plan_changes(state, principal, writes, summary)` takes the documents a request writes (None for a
deletion) and returns a `Plan`: the changes, the denials and warnings of admission.lp and the
operator policies (after mutation, on the effective result), and the puts, deletes and compares
of the one transaction that commits it — with the external-port claims its services take or
release (port_claims.py), and the guards of `share network` groups (group_claims.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ccattler.engine.admission.breakglass import break_glass
from ccattler.engine.admission.capabilities import capability_kind, ref_from_key
from ccattler.engine.admission.escalation import add_conferred
from ccattler.engine.admission.evaluate import Context, Verdict, evaluate, wanted_signatures
from ccattler.engine.admission.group_claims import group_claim_writes
from ccattler.engine.admission.model import Change, Denial, ObjectRef, PolicyWarning, Principal
from ccattler.engine.admission.mutation import apply_mutations
from ccattler.engine.admission.port_claims import Claim, claim_writes, read_claims
from ccattler.engine.admission.vocabulary import (
    Facts,
    Request,
    add_auth,
    add_external_claims,
    add_quota,
    add_requests,
    add_shared_ports,
    add_subject,
)
from ccattler.engine.facts import service_doc
from ccattler.engine.facts.keys import (
    CLAIMS,
    DESIRED,
    DESIRED_CONNECTIONS,
    DESIRED_GRANTS,
    DESIRED_GROUPS,
    DESIRED_LP,
    DESIRED_POLICIES,
    DESIRED_ROLES,
    DESIRED_SECRETS,
    DESIRED_TENANTS,
    EXTERNAL_PORT_CLAIMS,
    SHARED_NETWORK,
)
from ccattler.engine.store import Compare, Store

#: Documents that say who may do what (auth groups among `group`s).
AUTH_PREFIXES = (DESIRED_ROLES, DESIRED_POLICIES, DESIRED_GRANTS, DESIRED_GROUPS)
#: Documents that decide admission; the commit is guarded on every key read under them.
GUARDED_PREFIXES = (*AUTH_PREFIXES, DESIRED_LP, DESIRED_TENANTS)


@dataclass(frozen=True, slots=True)
class State:
    """The desired state at one revision: documents, their mod revisions, operator policies."""

    revision: int
    docs: Mapping[str, Mapping[str, Any]]
    mod_revisions: Mapping[str, int]
    policies: tuple[tuple[str, str], ...]  # (name, .lp text), by name
    #: External-port claims at the same revision (read with `desired/`), claim key → Claim.
    claims: Mapping[str, Claim] = field(default_factory=dict)
    #: The mod revision of `claim/shared-network` at the same revision (0: absent).
    shared_revision: int = 0


def read_state(store: Store, prefixes: tuple[str, ...] = (DESIRED,)) -> State:
    """Documents under `prefixes` (`desired/lp/` split out as operator policies); with `desired/`
    also the external-port claims and `claim/shared-network`, at the same revision."""
    docs: dict[str, Mapping[str, Any]] = {}
    mods: dict[str, int] = {}
    revision = 0
    for prefix in prefixes:
        facts, revision = store.range(prefix, revision or None)
        for fact in facts:
            docs[fact.key] = fact.value
            mods[fact.key] = fact.mod_revision
    claims, shared_revision = {}, 0
    if DESIRED in prefixes:
        held = store.range(CLAIMS, revision or None)[0]  # one read for both kinds of claim
        claims = read_claims(f for f in held if f.key.startswith(EXTERNAL_PORT_CLAIMS))
        shared_revision = next((f.mod_revision for f in held if f.key == SHARED_NETWORK), 0)
    policies = tuple(
        (docs[key]["name"], docs[key]["text"]) for key in sorted(docs)
        if key.startswith(DESIRED_LP) and docs[key].get("program", "admission") == "admission"
    )
    return State(revision, docs, mods, policies, claims, shared_revision)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a request changes, what admission says about it, and the transaction that commits it."""

    revision: int
    added: tuple[Change, ...]
    changed: tuple[Change, ...]
    removed: tuple[Change, ...]
    unchanged: tuple[ObjectRef, ...]
    denials: tuple[Denial, ...]
    warnings: tuple[PolicyWarning, ...]
    puts: Mapping[str, Any]
    deletes: tuple[str, ...]
    compares: tuple[Compare, ...]


def request_name(ref: ObjectRef, cap_kind: str) -> str:
    """The `Name` of a request: `tenant/name`, prefixed with the object kind when it is not the
    capability kind (`gate:frontend/shop`), so objects of different kinds never share a name."""
    return ref.full_name if ref.kind == cap_kind else f"{ref.kind}:{ref.full_name}"


def object_request(verb: str, ref: ObjectRef, old: Any, new: Any) -> Request:
    cap_kind = capability_kind(ref, new if new is not None else old)
    return Request(verb, cap_kind, request_name(ref, cap_kind), ref, old, new)


def _secret_refs(doc: Mapping[str, Any] | None, docs: Mapping[str, Any]) -> set[str]:
    """Secrets a service mounts, directly or through its connections (`tenant/name`)."""
    if not doc:
        return set()
    refs = {s["name"] for s in service_doc.secrets(doc)}
    for connection in service_doc.connections(doc):
        tenant, _, name = connection.partition("/")
        secret = (docs.get(f"{DESIRED_CONNECTIONS}{tenant}/{name}") or {}).get("secret")
        if secret:
            refs.add(secret)
    return refs


def _secret_use(change: Change, after: Mapping[str, Any], before: Mapping[str, Any]) -> list[Request]:
    """A service that starts mounting a secret needs secret.use on it (else service.create would
    hand out every secret)."""
    if change.ref.kind != "service":
        return []
    new_refs = _secret_refs(change.new, after) - _secret_refs(change.old, before)
    requests = []
    for full in sorted(new_refs):
        tenant, _, name = full.partition("/")
        ref = ObjectRef("secret", tenant, name, f"{DESIRED_SECRETS}{tenant}/{name}")
        requests.append(Request("use", "secret", full, ref, None, after.get(ref.key) or {}))
    return requests


def _classify(
    state: State, writes: Mapping[str, Mapping[str, Any] | None]
) -> tuple[list[Change], list[Change], list[Change], list[ObjectRef]]:
    added, changed, removed, unchanged = [], [], [], []
    for key in sorted(writes):
        ref, old, new = ref_from_key(key), state.docs.get(key), writes[key]
        if new is None:
            if old is not None:
                removed.append(Change(ref, old, None))
        elif old is None:
            added.append(Change(ref, None, new))
        elif old != new:
            changed.append(Change(ref, old, new))
        else:
            unchanged.append(ref)
    return added, changed, removed, unchanged


def _tenant_of(ref: ObjectRef) -> str | None:
    """The tenant whose quota an object counts against (a tenant object: itself)."""
    return ref.name if ref.kind == "tenant" else ref.tenant


def _judge(
    state: State, principal: Principal, writes: Mapping[str, Mapping[str, Any] | None], summary: str
) -> tuple[tuple[list[Change], ...], Verdict]:
    added, changed, removed, unchanged = _classify(state, writes)
    after = {k: v for k, v in state.docs.items() if not k.startswith(DESIRED_LP)}
    for key, doc in writes.items():
        if doc is None:
            after.pop(key, None)
        else:
            after[key] = doc
    verbs = (("create", added), ("update", changed), ("delete", removed))
    requests = [object_request(verb, c.ref, c.old, c.new) for verb, changes in verbs for c in changes]
    for change in added + changed:
        requests += _secret_use(change, after, state.docs)
    tenants = {t for c in added + changed + removed if (t := _tenant_of(c.ref)) is not None}
    # Break-glass first: the admin's policy removal never waits on a policy worker.
    policies = () if break_glass(principal, requests) else state.policies
    facts = Facts(wanted_signatures(policies), wire=bool(policies))
    add_subject(facts, principal)
    add_requests(facts, requests)
    add_auth(facts, {k: v for k, v in state.docs.items() if k.startswith(AUTH_PREFIXES)})
    add_quota(facts, tenants, state.docs, after)
    add_conferred(facts, requests, after)
    add_external_claims(facts, requests, after)
    add_shared_ports(facts, requests, after)
    context = context_for(state, principal, requests, summary)
    verdict = evaluate(facts, policies, context) if requests else Verdict((), (), ())
    return (added, changed, removed, unchanged), verdict


def context_for(state: State, principal: Principal, requests: list[Request], summary: str) -> Context:
    subject: dict[str, tuple[str, ...]] = {"name": (principal.name,), "group": tuple(principal.groups)}
    if principal.team:
        subject["team"] = (principal.team,)
    policies = {
        doc["name"]: doc for key, doc in state.docs.items() if key.startswith(DESIRED_POLICIES)
    }
    return Context(summary, {(r.verb, r.kind, r.name): r for r in requests}, subject, policies)


def plan_changes(
    state: State, principal: Principal, writes: Mapping[str, Mapping[str, Any] | None], summary: str,
    warnings: tuple[PolicyWarning, ...] = (),
) -> Plan:
    """Judge `writes` (key → new document, None to delete) against `state`; mutation first fills
    operator defaults, then everything is judged again on the effective result."""
    classes, verdict = _judge(state, principal, writes, summary)
    denials = list(verdict.denials)
    if verdict.mutations:
        mutated, mutation_denials = apply_mutations(writes, verdict.mutations, summary)
        classes, verdict = _judge(state, principal, mutated, summary)
        denials = list(verdict.denials) + mutation_denials
    added, changed, removed, unchanged = classes
    touched = [c.ref.key for c in added + changed + removed]
    guarded = sorted(set(touched) | {k for k in state.docs if k.startswith(GUARDED_PREFIXES)})
    puts = {c.ref.key: c.new for c in added + changed}
    deletes = tuple(c.ref.key for c in removed)
    claims = claim_writes(state.docs, state.claims, puts, deletes)
    groups = group_claim_writes(state.docs, state.mod_revisions, state.shared_revision, puts, deletes)
    compares = {k: state.mod_revisions.get(k, 0) for k in guarded}
    for compare in (*claims.compares, *groups.compares):  # each key once: a txn counts its compares
        compares.setdefault(compare.key, compare.mod_revision)
    return Plan(
        revision=state.revision,
        added=tuple(added), changed=tuple(changed), removed=tuple(removed), unchanged=tuple(unchanged),
        denials=tuple(denials),
        warnings=warnings + verdict.warnings,
        puts={**puts, **claims.puts, **groups.puts},
        deletes=deletes + tuple(claims.deletes),
        compares=tuple(Compare(k, r) for k, r in compares.items()),
    )
