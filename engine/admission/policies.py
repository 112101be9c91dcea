"""Operator `.lp` policies: validated, stored at `desired/lp/<name>`, judged on the next request.

A policy must parse, ground against the admission vocabulary (`VOCABULARY`) and read no predicate
that is neither in the vocabulary nor derived by the policy itself (a typo such as `servce(S)`
would otherwise be silently false). Errors name `<name>.lp:line:col`.
"""

from __future__ import annotations

from dataclasses import dataclass

from clingo import ast

from ccattler.engine.admission.evaluate import POLICY_OUTPUTS, SOLVE_OPTIONS
from ccattler.engine.admission.model import ApplyResult, ObjectRef, PolicyError, Principal
from ccattler.engine.admission.operations import NotFound, run_plan
from ccattler.engine.admission.plan import Plan, State, plan_changes
from ccattler.engine.admission.vocabulary import VOCABULARY
from ccattler.engine.facts import desired_key
from ccattler.engine.solve import LogicError, Session, program_from_text
from ccattler.engine.store import Store

_KNOWN = set(VOCABULARY) | set(POLICY_OUTPUTS)


@dataclass(frozen=True, slots=True)
class OperatorPolicy:
    """One stored operator policy."""

    name: str
    text: str
    revision: int


def _signature(term: ast.AST) -> tuple[str, int] | None:
    if term.ast_type == ast.ASTType.UnaryOperation:
        inner = _signature(term.argument)
        return (f"-{inner[0]}", inner[1]) if inner else None
    if term.ast_type == ast.ASTType.Function and term.name:
        return term.name, len(term.arguments)
    if term.ast_type == ast.ASTType.SymbolicTerm and term.symbol.type.name == "Function":
        return term.symbol.name, len(term.symbol.arguments)
    return None


def _head_atoms(head: ast.AST) -> list[ast.AST]:
    kind = head.ast_type
    if kind == ast.ASTType.Literal:
        return [head.atom]
    if kind in (ast.ASTType.Disjunction, ast.ASTType.Aggregate):
        return [e.literal.atom for e in head.elements]
    if kind == ast.ASTType.HeadAggregate:
        return [e.condition.literal.atom for e in head.elements]
    return []


class _Atoms(ast.Transformer):
    """Collects every symbolic atom of a statement with its location."""

    def __init__(self) -> None:
        self.found: list[tuple[tuple[str, int], ast.Location]] = []

    def visit_SymbolicAtom(self, node: ast.AST) -> ast.AST:  # noqa: N802 (clingo's visitor naming)
        sig = _signature(node.symbol)
        if sig is not None:
            self.found.append((sig, node.symbol.location))
        return node


def unknown_predicates(name: str, text: str) -> list[str]:
    """`<name>.lp:line:col: …` for every body predicate neither in the vocabulary nor derived here."""
    defined: set[tuple[str, int]] = set()
    used = _Atoms()

    def on_statement(stm: ast.AST) -> None:
        if stm.ast_type == ast.ASTType.Rule:
            for atom in _head_atoms(stm.head):
                if atom.ast_type == ast.ASTType.SymbolicAtom and (sig := _signature(atom.symbol)):
                    defined.add(sig)
        elif stm.ast_type == ast.ASTType.Defined:
            defined.add((stm.name, stm.arity))
        elif stm.ast_type == ast.ASTType.External and (sig := _signature(stm.atom.symbol)):
            defined.add(sig)
        used(stm)

    ast.parse_string(text, on_statement)
    errors = []
    for (pred, arity), loc in used.found:
        if (pred, arity) not in defined and (pred, arity) not in _KNOWN:
            errors.append(
                f"{name}.lp:{loc.begin.line}:{loc.begin.column}: error: unknown predicate {pred}/{arity}: "
                "not in the admission vocabulary (rules/README.md) and not derived by this policy"
            )
    return errors


def validate_policy(name: str, text: str) -> None:
    """Raise `PolicyError` unless `text` parses, grounds and reads only known predicates."""
    try:
        session = Session(program_from_text(f"lp/{name}", text, label=f"{name}.lp"), SOLVE_OPTIONS)
        session.ground()
    except LogicError as exc:
        # The bridge labels parse messages only; grounding messages still say <block>.
        message = str(exc).replace("<block>", f"{name}.lp")
        raise PolicyError(f"policy {name} is not valid:\n{message}") from None
    errors = unknown_predicates(name, text)
    if errors:
        raise PolicyError(f"policy {name} is not valid:\n" + "\n".join(errors))


def apply_policy(
    store: Store, principal: Principal, name: str, text: str, *, dry_run: bool = False
) -> ApplyResult:
    """Validate and store operator policy `name` (needs policy.create or policy.update)."""
    key = desired_key("lp", name)
    validate_policy(name, text)
    doc = {"kind": "lp", "name": name, "source": f"{name}.lp", "text": text}

    def make_plan(state: State) -> Plan:
        return plan_changes(state, principal, {key: doc}, f"policy apply {name}")

    return run_plan(store, dry_run, make_plan, f"policy apply {name}")


def list_policies(store: Store) -> list[OperatorPolicy]:
    """Every stored operator policy, by name."""
    facts, _ = store.range("desired/lp/")
    return [OperatorPolicy(f.value["name"], f.value["text"], f.mod_revision) for f in facts]


def delete_policy(store: Store, principal: Principal, name: str) -> ApplyResult:
    """Remove operator policy `name` (needs policy.delete)."""
    ref = ObjectRef("lp", None, name, desired_key("lp", name))

    def make_plan(state: State) -> Plan:
        if ref.key not in state.docs:
            raise NotFound(f"policy {name} not found")
        return plan_changes(state, principal, {ref.key: None}, f"policy delete {name}")

    return run_plan(store, False, make_plan, f"policy delete {name}")
