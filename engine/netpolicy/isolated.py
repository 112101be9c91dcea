"""The netpolicy solve when operator extensions are stored: in a policy worker, never in-process.

An extension is operator `.lp` code; it passed validation over a small fixture, but over the real
cluster's facts its grounding may still explode, or clingo may abort in a nothrow callback. So
rules/netpolicy.lp and the extensions are grounded and solved in a pre-started policy worker
(engine/admission/policy_pool.py) under its hard limits: `netpolicy_seconds` of wall clock (the
worker is killed when grounding overruns), RLIMIT_AS, and caps on the answer's atoms and bytes.
Facts travel as typed symbol trees (policy_wire.py) and enter the worker's clingo through the
backend; the answer comes back decoded by the worker (`policy_to_wire`: names sent once, tuples
as indices — 200,000 allowed tuples are a few MiB, not a symbol tree each). Without extensions the
solve stays in-process (evaluate.py): only project code runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clingo import Symbol

from ccattler.engine.admission.policy_pool import PolicyFailure, pool
from ccattler.engine.admission.policy_wire import WireError, decode_symbol, encode_symbol
from ccattler.engine.facts.errors import CcaError


@dataclass(frozen=True, slots=True)
class ExtensionFailure:
    """Why the solve with extensions gave no answer: the extensions (their `desired/lp/` keys), the
    budget that ran out (None when the worker died or the program failed) and what happened."""

    extensions: tuple[str, ...]
    code: str  # policy_budget | policy_crashed | policy_error
    budget: str | None
    message: str

    def text(self) -> str:
        names = ", ".join(self.extensions)
        budget = f" (budget: {self.budget})" if self.budget else ""
        return f"netpolicy extension {names}: {self.message}{budget}"


class ExtensionFailed(CcaError):
    """The netpolicy solve with operator extensions failed in its worker (`failure` says why)."""

    def __init__(self, failure: ExtensionFailure, text: str | None = None) -> None:
        super().__init__(text or failure.text())
        self.failure = failure


def solve_isolated(extensions: Sequence[tuple[str, str]], facts: Iterable[Symbol]) -> Any:
    """The decoded policy (evaluate.Policy) of rules/netpolicy.lp plus `extensions` over `facts`, or
    an `ExtensionFailure` saying why not."""
    memo: dict[Symbol, object] = {}
    trees = [encode_symbol(f, memo) for f in facts]
    found = pool().netpolicy(list(extensions), trees)
    if not isinstance(found, PolicyFailure):
        try:
            return policy_from_wire(found)
        except (WireError, LookupError, TypeError, ValueError) as exc:
            found = PolicyFailure("policy_budget", "output", f"its answer could not be read ({exc})")
    labels = tuple(label for label, _ in extensions)
    return ExtensionFailure(labels, found.code, found.budget, found.message)


def policy_to_wire(policy: Any) -> dict[str, Any]:
    """A decoded policy as compact JSON (in the worker): every name once, tuples as indices."""
    names: dict[str, int] = {}

    def n(text: str) -> int:
        return names.setdefault(text, len(names))

    def tuples(by_destination: Mapping[str, Any]) -> list[Any]:
        return [[n(d), [[n(t.source), t.port, n(t.protocol), n(t.rule)] for t in ts]]
                for d, ts in by_destination.items()]

    memo: dict[Symbol, Any] = {}
    out = {"guarded": [[n(d), [n(r) for r in rules]] for d, rules in policy.guarded.items()],
           "allowed": tuples(policy.allowed), "denied": tuples(policy.denied),
           "lints": [[rule, code, list(args)] for rule, code, args in policy.lints],
           "verdicts": [encode_symbol(v, memo) for v in policy.verdicts]}
    out["names"] = list(names)
    return out


def policy_from_wire(doc: Any) -> Any:
    """The policy `policy_to_wire` sent; a malformed answer raises (WireError, LookupError, …)."""
    from ccattler.engine.netpolicy.evaluate import Allowed, Policy

    if not isinstance(doc, dict):
        raise WireError("the netpolicy answer is not an object")
    names = [str(x) for x in doc["names"]]

    def tuples(rows: Any) -> dict[str, tuple[Any, ...]]:
        return {names[d]: tuple(Allowed(names[s], int(port), names[p], names[r]) for s, port, p, r in ts)
                for d, ts in rows}

    lints = tuple((str(rule), str(code), tuple(str(a) for a in args)) for rule, code, args in doc["lints"])
    return Policy({names[d]: tuple(names[r] for r in rules) for d, rules in doc["guarded"]},
                  tuples(doc["allowed"]), tuples(doc["denied"]), lints,
                  tuple(decode_symbol(v) for v in doc["verdicts"]))
