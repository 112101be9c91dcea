"""Run rules/admission.lp and each operator policy over one request's facts; decode their verdicts.

rules/admission.lp runs here, in-process. Each operator policy is grounded in its own clingo
Control in a policy worker process (policy_pool.py), beside the facts it reads, so every
`deny`/`warn`/`set_default` it derives is attributed to it by name, and a policy that overruns its
budget (time, memory, output) or fails denies the request naming itself and the budget (fail
closed). `SOLVE_OPTIONS` is the built-in program's knob: the programs are stratified, so the first
model is the only one and no optimisation runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from clingo import Symbol

from ccattler.engine.admission.model import Denial, PolicyWarning
from ccattler.engine.admission.policy_pool import PolicyFailure, pool
from ccattler.engine.admission.policy_wire import encode_symbol
from ccattler.engine.admission.reasons import format_operator, format_reject, render_value
from ccattler.engine.admission.signatures import Signature, signatures
from ccattler.engine.admission.vocabulary import Facts, Request
from ccattler.engine.solve import (
    Reject,
    Session,
    SolveOptions,
    load_program,
    program_path,
    to_python,
)

SOLVE_OPTIONS = SolveOptions(conflicts=10_000, wall_seconds=10.0, optimize=False)

#: The outputs an operator policy may derive (read back regardless of its #show statements).
POLICY_OUTPUTS = (("deny", 2), ("warn", 2), ("message", 2), ("set_default", 3))


@dataclass(frozen=True, slots=True)
class Mutation:
    """`set_default(Service, Field, Value)` derived by an operator policy."""

    policy: str
    service: str
    field: str
    value: Any


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the programs said about one request."""

    denials: tuple[Denial, ...]
    warnings: tuple[PolicyWarning, ...]
    mutations: tuple[Mutation, ...]


@dataclass(frozen=True, slots=True)
class Context:
    """What the formatters need besides the atoms: the request, the subject and the policy docs."""

    summary: str  # "apply shop.cca", "exec service payments/checkout"
    requests: Mapping[tuple[str, str, str], Request]
    subject: Mapping[str, tuple[str, ...]]  # subject attribute → values
    policies: Mapping[str, Mapping[str, Any]]  # ABAC policy name → desired/policy document


#: Shown beside each operator policy, whatever #show statements the policy has of its own.
SHOW_OUTPUTS = "".join(f"#show {name}/{arity}.\n" for name, arity in POLICY_OUTPUTS)


def _builtin_reads() -> frozenset[Signature]:
    return signatures(program_path("admission").read_text()).used


def wanted_signatures(operator_policies: Iterable[tuple[str, str]]) -> frozenset[Signature]:
    """Every predicate admission.lp or one of the operator policies reads."""
    wanted = set(_builtin_reads())
    for _, text in operator_policies:
        wanted |= pool().reads(text)  # parsed in a worker: operator text never meets clingo here
    return frozenset(wanted)


def builtin_verdict(facts: Facts, context: Context) -> list[Denial]:
    """RBAC/ABAC, secret use and quota from rules/admission.lp."""
    session = Session(load_program("admission"), SOLVE_OPTIONS)
    session.add_facts(facts.select(_builtin_reads()))
    session.ground()
    symbols = session.solve().symbols
    rejects = [Reject(*(to_python(a) for a in s.arguments)) for s in symbols]  # only reject/4 is shown
    # An update failing alike before and after reads as one denial.
    denials = {format_reject(r, context) for r in rejects}
    return sorted(denials, key=lambda d: (d.subject, d.policy, d.message))


def policy_failure(name: str, failure: PolicyFailure, context: Context) -> Denial:
    """The denial of a policy that gave no verdict (codes: policy_pool.PolicyFailure); the value
    names the budget that ran out."""
    if failure.code == "policy_error":
        return Denial(name, failure.code, context.summary, name, f"policy {name} failed: {failure.message}")
    what = f"exceeded its {failure.budget} budget" if failure.budget else "could not be judged"
    return Denial(
        name, failure.code, context.summary, failure.budget or "worker",
        f"policy {name} ({name}.lp) {what}: {failure.message}; the request is refused (fail closed); "
        f"a cluster admin can remove it with `cca policy delete {name}`",
    )


def operator_verdict(
    name: str, text: str, facts: Facts, context: Context, memo: dict[Symbol, object] | None = None
) -> tuple[list[Denial], list[PolicyWarning], list[Mutation]]:
    """One operator policy's denials, warnings and mutations, judged in a policy worker. A policy
    that fails to ground or solve, or overruns its budget, denies (fail closed) and says why."""
    reads = pool().reads(text)
    trees = facts.select_trees(reads)
    if trees is None:  # facts built without their wire form
        memo = {} if memo is None else memo
        trees = [encode_symbol(s, memo) for s in facts.select(reads)]
    symbols = pool().evaluate(name, text, trees)
    if isinstance(symbols, PolicyFailure):
        return [policy_failure(name, symbols, context)], [], []
    out: dict[tuple[str, int], list[Symbol]] = {sig: [] for sig in POLICY_OUTPUTS}
    for sym in symbols:
        out.get((sym.name, len(sym.arguments)), []).append(sym)
    messages: dict[str, str] = {}
    for sym in out[("message", 2)]:
        code, text = (render_value(to_python(a)) for a in sym.arguments)
        messages.setdefault(code, text)
    denials = [format_operator(name, sym, messages, context) for sym in out[("deny", 2)]]
    warnings = [
        PolicyWarning(d.policy, d.code, d.message)
        for d in (format_operator(name, sym, messages, context) for sym in out[("warn", 2)])
    ]
    mutations = [
        Mutation(name, render_value(to_python(s.arguments[0])), render_value(to_python(s.arguments[1])),
                 to_python(s.arguments[2]))
        for s in out[("set_default", 3)]
    ]
    return denials, warnings, mutations


def evaluate(
    facts: Facts, operator_policies: Iterable[tuple[str, str]], context: Context
) -> Verdict:
    """The built-in program and every operator policy over the same facts."""
    denials = builtin_verdict(facts, context)
    warnings: list[PolicyWarning] = []
    mutations: list[Mutation] = []
    memo: dict[Symbol, object] = {}  # the facts' wire form, shared by every policy
    for name, text in operator_policies:
        d, w, m = operator_verdict(name, text, facts, context, memo)
        denials += d
        warnings += w
        mutations += m
    return Verdict(tuple(denials), tuple(warnings), tuple(mutations))

