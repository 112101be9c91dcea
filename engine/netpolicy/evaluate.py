"""Solve rules/netpolicy.lp (plus extensions) over a snapshot's facts and decode the policy.

The program is stratified: the first model is the only one, no optimisation runs. Without
operator extensions it is solved in-process (project code only); with extensions in a policy
worker under hard limits (isolated.py), and a failure there raises `ExtensionFailed`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clingo import Symbol

from ccattler.engine.facts.keys import DESIRED_SERVICES
from ccattler.engine.netpolicy.facts import Part, extension_texts, snapshot_facts
from ccattler.engine.netpolicy.isolated import ExtensionFailed, ExtensionFailure, solve_isolated
from ccattler.engine.solve import Session, SolveOptions, load_program, to_python

SOLVE_OPTIONS = SolveOptions(conflicts=10_000, wall_seconds=60.0, optimize=False)


@dataclass(frozen=True, slots=True, order=True)
class Allowed:
    """One accepted tuple into a destination: source identity, port (0 = any), protocol (tcp|udp|any)."""

    source: str
    port: int
    protocol: str
    rule: str


@dataclass(frozen=True, slots=True)
class Policy:
    """The answer set, by destination identity."""

    guarded: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # D → rules naming it
    allowed: Mapping[str, tuple[Allowed, ...]] = field(default_factory=dict)  # D → tuples (guarded D only)
    denied: Mapping[str, tuple[Allowed, ...]] = field(default_factory=dict)  # D → denying tuples
    lints: tuple[tuple[str, str, tuple[Any, ...]], ...] = ()  # (rule, code, args)
    verdicts: tuple[Symbol, ...] = ()  # reject/4 and accept/3 of explained connections


def _name(value: object) -> str:
    return str(value)


def evaluate(values: Mapping[str, Any], extra: Iterable[Symbol] = (),
             extensions: Iterable[tuple[str, str]] | None = None,
             part: Part | None = None) -> Policy:
    """The policy of a snapshot's values; `extra` adds facts (e.g. `connection/4` to explain).

    With `part`, a partial solve: exact for its destination identities (a destination's policy
    depends only on the rules that select it as `to`, its ports and the identities) and for the
    lints of the rules it reads; the rest of the answer is incomplete. Not with extensions, which
    may relate any destinations."""
    texts = extension_texts(values) if extensions is None else list(extensions)
    facts = [*snapshot_facts(values, part), *extra]
    if texts:
        found = solve_isolated(texts, facts)
        if isinstance(found, ExtensionFailure):
            raise ExtensionFailed(found)
        return found
    session = Session(load_program("netpolicy"), SOLVE_OPTIONS)
    session.add_facts(facts)
    session.ground()
    return decode_policy(session.solve().symbols)


def evaluate_for(values: Mapping[str, Any], destinations: set[str], extra: Iterable[Symbol] = ()) -> Policy:
    """The policy of `destinations` only (and verdicts of `extra` connections into them): a
    partial solve when no extension is stored, so explain stays quick at 10,000 services."""
    extensions = extension_texts(values)
    if extensions:
        return evaluate(values, extra, extensions)
    identities = {k[len(DESIRED_SERVICES):] for k in values if k.startswith(DESIRED_SERVICES)}
    return evaluate(values, extra, (), Part.of(values, destinations, (), identities))


def decode_policy(symbols: Iterable[Symbol]) -> Policy:
    guarded: dict[str, list[str]] = defaultdict(list)
    allowed: dict[str, list[Allowed]] = defaultdict(list)
    denied: dict[str, list[Allowed]] = defaultdict(list)
    lints, verdicts = [], []
    for sym in symbols:
        name, args = sym.name, sym.arguments
        if name == "guarded" and len(args) == 2:
            guarded[args[0].string].append(_name(to_python(args[1])))
        elif name in ("allowed", "denied") and len(args) == 5:
            tuple_ = Allowed(args[1].string, args[2].number, _name(to_python(args[3])),
                             _name(to_python(args[4])))
            (allowed if name == "allowed" else denied)[args[0].string].append(tuple_)
        elif name == "lint" and len(args) == 3:
            lints.append((_name(to_python(args[0])), _name(to_python(args[1])),
                          tuple(_name(a) for a in to_python(args[2]))))
        elif name in ("reject", "accept"):
            verdicts.append(sym)
    return Policy({d: tuple(sorted(r)) for d, r in guarded.items()},
                  {d: tuple(sorted(set(t))) for d, t in allowed.items() if d in guarded},
                  {d: tuple(sorted(set(t))) for d, t in denied.items()},
                  tuple(sorted(lints)), tuple(verdicts))


def merged(policy: Policy, partial: Policy, part: Part) -> Policy:
    """`policy` with the exact part of a partial solve put in: its entries for the part's
    destinations, and its lints for the part's rules."""
    destinations, rules = part.destinations, part.rule_ids()

    def put(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
        out = {d: v for d, v in old.items() if d not in destinations}
        out.update((d, v) for d, v in new.items() if d in destinations)
        return out

    lints = [lint for lint in policy.lints if lint[0] not in rules] + list(partial.lints)
    return Policy(put(policy.guarded, partial.guarded), put(policy.allowed, partial.allowed),
                  put(policy.denied, partial.denied), tuple(sorted(lints)))
