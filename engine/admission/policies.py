"""Operator `.lp` policies: validated, stored at `desired/lp/<name>`, judged on the next request.

A policy must parse, read no predicate that is neither in the vocabulary (`VOCABULARY`) nor derived
by the policy itself (a typo such as `servce(S)` would otherwise be silently false), not recurse
through rules that build new terms, and ground and solve over a fixture of three of each vocabulary
fact in a child process within the admission budget (`probe.py`). Errors name `<name>.lp:line:col`.
At request time the stored policies run in policy workers (`policy_pool.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ccattler.engine.admission.evaluate import POLICY_OUTPUTS
from ccattler.engine.admission.model import ApplyResult, ObjectRef, PolicyError, Principal
from ccattler.engine.admission.operations import NotFound, run_plan
from ccattler.engine.admission.plan import Plan, State, plan_changes
from ccattler.engine.admission.probe import probe
from ccattler.engine.admission.signatures import signatures
from ccattler.engine.admission.vocabulary import VOCABULARY
from ccattler.engine.facts import desired_key
from ccattler.engine.facts.keys import DESIRED_LP
from ccattler.engine.store import Store

#: The largest policy text accepted, in bytes.
MAX_POLICY_BYTES = 256 * 1024
_KNOWN = set(VOCABULARY) | set(POLICY_OUTPUTS)
_FORBIDDEN = re.compile(r"#include|#script")


@dataclass(frozen=True, slots=True)
class OperatorPolicy:
    """One stored operator policy."""

    name: str
    text: str
    revision: int


def static_errors(name: str, text: str) -> list[str]:
    """`<name>.lp:line:col: error: …` for every predicate neither in the vocabulary nor derived
    here, and every recursive rule that builds new terms (its grounding may never end)."""
    found = signatures(text)
    errors = [
        f"{name}.lp:{use.line}:{use.column}: error: unknown predicate {use.signature[0]}/{use.signature[1]}: "
        "not in the admission vocabulary (rules/README.md) and not derived by this policy"
        for use in found.uses
        if use.signature not in found.defined and use.signature not in _KNOWN
    ]
    errors += [
        f"{name}.lp:{use.line}:{use.column}: error: {use.signature[0]}/{use.signature[1]} is derived "
        "recursively from new terms (like `p(X+1) :- p(X).`): its grounding may never finish"
        for use in found.unbounded
    ]
    return errors


def _check_size(name: str, text: str) -> None:
    size = len(text.encode("utf-8", "surrogateescape"))
    if size > MAX_POLICY_BYTES:
        raise PolicyError(
            f"policy {name} is not valid:\n{name}.lp: error: {size} bytes, more than the "
            f"{MAX_POLICY_BYTES} a policy may have"
        )


def validate_policy(name: str, text: str) -> None:
    """Raise `PolicyError` unless `text` parses, reads only known predicates, and grounds over a
    fixture in a child process within `probe`'s limits (CPU, memory, wall clock)."""
    for directive in _FORBIDDEN.finditer(text):
        line = text.count("\n", 0, directive.start()) + 1
        raise PolicyError(
            f"policy {name} is not valid:\n{name}.lp:{line}: error: {directive[0]} is not allowed in a "
            "policy (it would read server files or run code)"
        )
    _check_size(name, text)
    # Parsing, the static checks, grounding and solving all run in the child (probe.py): clingo
    # can abort the process it runs in, so operator code is never run here first.
    probe(name, text)


def apply_policy(
    store: Store, principal: Principal, name: str, text: str, *, dry_run: bool = False
) -> ApplyResult:
    """Validate and store operator policy `name` (needs policy.create or policy.update)."""
    from ccattler.engine.netpolicy.extensions import program_of

    key = desired_key("lp", name)
    doc = {"kind": "lp", "name": name, "source": f"{name}.lp", "text": text}
    if program_of(text) == "netpolicy":  # loaded after rules/netpolicy.lp, not by admission
        _check_size(name, text)
        probe(name, text, program="netpolicy")  # clingo may abort: never in this process
        doc["program"] = "netpolicy"
    else:
        validate_policy(name, text)

    def make_plan(state: State) -> Plan:
        return plan_changes(state, principal, {key: doc}, f"policy apply {name}")

    return run_plan(store, dry_run, make_plan, f"policy apply {name}")


def list_policies(store: Store) -> list[OperatorPolicy]:
    """Every stored operator policy, by name."""
    facts, _ = store.range(DESIRED_LP)
    return [OperatorPolicy(f.value["name"], f.value["text"], f.mod_revision) for f in facts]


def delete_policy(store: Store, principal: Principal, name: str) -> ApplyResult:
    """Remove operator policy `name` (needs policy.delete)."""
    ref = ObjectRef("lp", None, name, desired_key("lp", name))

    def make_plan(state: State) -> Plan:
        if ref.key not in state.docs:
            raise NotFound(f"policy {name} not found")
        return plan_changes(state, principal, {ref.key: None}, f"policy delete {name}")

    return run_plan(store, False, make_plan, f"policy delete {name}")
