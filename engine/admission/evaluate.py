"""Run rules/admission.lp and each operator policy over one request's facts; decode their verdicts.

Each operator policy is grounded in its own clingo Control beside the same facts, so every
`deny`/`warn`/`set_default` it derives is attributed to it by name. `SOLVE_OPTIONS` is the knob:
the programs are stratified, so the first model is the only one and no optimisation runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from clingo import Symbol

from ccattler.engine.admission.model import Denial, PolicyWarning
from ccattler.engine.admission.reasons import format_operator, format_reject, render_value
from ccattler.engine.admission.signatures import Signature, signatures
from ccattler.engine.admission.vocabulary import Facts, Request
from ccattler.engine.solve import (
    LogicError,
    Reject,
    Session,
    SolveOptions,
    load_program,
    program_from_text,
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
_SHOW_OUTPUTS = "".join(f"#show {name}/{arity}.\n" for name, arity in POLICY_OUTPUTS)


def _builtin_reads() -> frozenset[Signature]:
    return signatures(program_path("admission").read_text()).used


def wanted_signatures(operator_policies: Iterable[tuple[str, str]]) -> frozenset[Signature]:
    """Every predicate admission.lp or one of the operator policies reads."""
    wanted = set(_builtin_reads())
    for _, text in operator_policies:
        try:
            wanted |= signatures(text).used
        except RuntimeError:
            continue  # does not parse: operator_verdict reports it as that policy's denial
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


def operator_verdict(
    name: str, text: str, facts: Facts, context: Context
) -> tuple[list[Denial], list[PolicyWarning], list[Mutation]]:
    """One operator policy's denials, warnings and mutations. A policy that fails to ground or
    solve denies (fail closed) and says why."""
    try:
        program = program_from_text(f"lp/{name}", text, label=f"{name}.lp")
        session = Session(program.with_texts([("admission outputs", _SHOW_OUTPUTS)]), SOLVE_OPTIONS)
        session.add_facts(facts.select(signatures(text).used))
        session.ground()
        symbols = session.solve().symbols
    except LogicError as exc:
        message = f"policy {name} failed: {str(exc).replace('<block>', f'{name}.lp')}"
        return [Denial(name, "policy_error", context.summary, name, message)], [], []
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
    for name, text in operator_policies:
        d, w, m = operator_verdict(name, text, facts, context)
        denials += d
        warnings += w
        mutations += m
    return Verdict(tuple(denials), tuple(warnings), tuple(mutations))

