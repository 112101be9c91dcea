"""Operator network-policy extensions: `.lp` texts loaded after rules/netpolicy.lp.

A policy text whose first `%! program:` line says `netpolicy` is a netpolicy extension (`cca policy
apply --program netpolicy` appends the line). It is validated like an admission policy: it must
parse, contain no `#include`/`#script`, read only predicates netpolicy.lp reads or derives (or
that it derives itself), not recurse through term-building rules, and ground with netpolicy.lp
over a small fixture. Its outputs are `policy_deny/3` and `policy_names/2` (rules/README.md).
"""

from __future__ import annotations

import functools
import re

from ccattler.engine.admission.model import PolicyError
from ccattler.engine.admission.signatures import Signature, signatures
from ccattler.engine.solve import LogicError, Session, SolveOptions, atom, load_program, program_path

DIRECTIVE = re.compile(r"^%!\s*program:\s*(\S+)\s*$", re.M)
_FORBIDDEN = re.compile(r"#include|#script")
_PROBE = SolveOptions(conflicts=10_000, wall_seconds=5.0, optimize=False)


def program_of(text: str) -> str:
    """`netpolicy` for a netpolicy extension, `admission` for every other operator policy."""
    found = DIRECTIVE.search(text)
    return found.group(1) if found else "admission"


def with_directive(text: str, program: str) -> str:
    """`text` marked as an extension of `program` (the line goes last: error lines stay the user's)."""
    if program_of(text) == program:
        return text
    return f"{text}{'' if text.endswith(chr(10)) or not text else chr(10)}%! program: {program}\n"


@functools.cache
def vocabulary() -> frozenset[Signature]:
    """What an extension may read: everything netpolicy.lp reads (its inputs) or derives."""
    found = signatures(program_path("netpolicy").read_text())
    return found.used | found.defined


def _fixture() -> list:
    return [atom("identity", "a/x", "a"), atom("identity", "b/y", "b"),
            atom("rule", "r1", atom("allow")), atom("rule_from", "r1", atom("all")),
            atom("rule_to", "r1", atom("tenant", "b")), atom("exposes", "b/y", 80, atom("tcp"))]


def validate_extension(name: str, text: str) -> None:
    """Raise `PolicyError` naming `<name>.lp:line` unless `text` is a usable netpolicy extension."""
    for directive in _FORBIDDEN.finditer(text):
        line = text.count("\n", 0, directive.start()) + 1
        raise PolicyError(f"policy {name} is not valid:\n{name}.lp:{line}: error: {directive[0]} is not "
                          "allowed in a policy (it would read server files or run code)")
    try:
        found = signatures(text)
    except RuntimeError:
        found = None
    program = load_program("netpolicy").with_texts([(f"{name}.lp", text)])
    try:
        session = Session(program, _PROBE)
    except LogicError as exc:
        raise PolicyError(f"policy {name} is not valid:\n{exc}") from None
    assert found is not None
    errors = [f"{name}.lp:{u.line}:{u.column}: error: unknown predicate {u.signature[0]}/{u.signature[1]}: "
              "not in the netpolicy vocabulary (rules/README.md) and not derived by this policy"
              for u in found.uses if u.signature not in found.defined and u.signature not in vocabulary()]
    errors += [f"{name}.lp:{u.line}:{u.column}: error: {u.signature[0]}/{u.signature[1]} is derived "
               "recursively from new terms: its grounding may never finish" for u in found.unbounded]
    if errors:
        raise PolicyError(f"policy {name} is not valid:\n" + "\n".join(errors))
    try:
        session.add_facts(_fixture())
        session.ground()
        if session.solve().timed_out:
            raise PolicyError(f"policy {name} is not valid: it does not solve within 5 s on a fixture")
    except LogicError as exc:
        raise PolicyError(f"policy {name} is not valid:\n{exc}") from None
