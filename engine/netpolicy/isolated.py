"""The netpolicy solve when operator extensions are stored: in a policy worker, never in-process.

An extension is operator `.lp` code; it passed validation over a small fixture, but over the real
cluster's facts its grounding may still explode, or clingo may abort in a nothrow callback. So
rules/netpolicy.lp and the extensions are grounded and solved in a pre-started policy worker
(engine/admission/policy_pool.py) under its hard limits: `netpolicy_seconds` of wall clock (the
worker is killed when grounding overruns), RLIMIT_AS, and caps on the answer's atoms and bytes.
Facts travel as typed symbol trees (policy_wire.py) and enter the worker's clingo through the
backend. Without extensions the solve stays in-process (evaluate.py): only project code runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clingo import Symbol

from ccattler.engine.admission.policy_pool import PolicyFailure, pool
from ccattler.engine.admission.policy_wire import encode_symbol
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


def solve_isolated(extensions: Sequence[tuple[str, str]],
                   facts: Iterable[Symbol]) -> list[Symbol] | ExtensionFailure:
    """The answer's symbols of rules/netpolicy.lp plus `extensions` over `facts`, or why not."""
    memo: dict[Symbol, object] = {}
    trees = [encode_symbol(f, memo) for f in facts]
    found = pool().netpolicy(list(extensions), trees)
    if isinstance(found, PolicyFailure):
        labels = tuple(label for label, _ in extensions)
        return ExtensionFailure(labels, found.code, found.budget, found.message)
    return found
