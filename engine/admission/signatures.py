"""What a logic program reads and derives, from its syntax tree (cached by text).

Admission feeds each program only the facts it reads (`Signatures.used`), and an operator policy
is refused when it reads a predicate nobody provides or recurses through term-building rules.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from clingo import ast

Signature = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Use:
    """One predicate occurrence in a body (or anywhere), with its position."""

    signature: Signature
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Signatures:
    """The predicates a program derives (`defined`) and every one it mentions (`uses`)."""

    defined: frozenset[Signature]
    uses: tuple[Use, ...]
    #: Rules whose head builds new terms (`p(X+1)`, `p(f(X))`) from a body that depends on that
    #: head: grounding them may never finish, so policies may not contain them.
    unbounded: tuple[Use, ...] = ()

    @property
    def used(self) -> frozenset[Signature]:
        return frozenset(u.signature for u in self.uses)


def _signature(term: ast.AST) -> Signature | None:
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
    """Collects every symbolic atom of the statements it visits."""

    def __init__(self) -> None:
        self.uses: list[Use] = []

    def visit_SymbolicAtom(self, node: ast.AST) -> ast.AST:  # noqa: N802 (clingo's visitor naming)
        sig = _signature(node.symbol)
        if sig is not None:
            begin = node.symbol.location.begin
            self.uses.append(Use(sig, begin.line, begin.column))
        return node


class _Variables(ast.Transformer):
    def __init__(self) -> None:
        self.found = False

    def visit_Variable(self, node: ast.AST) -> ast.AST:  # noqa: N802
        self.found = True
        return node


_BUILT = (ast.ASTType.BinaryOperation, ast.ASTType.UnaryOperation, ast.ASTType.Function, ast.ASTType.Pool)


def _builds_terms(atom: ast.AST) -> bool:
    """True when a head atom makes new terms from variables (`p(X+1)`, `p(f(X))`, `p((X,Y))`)."""
    symbol = atom.symbol
    for argument in symbol.arguments if symbol.ast_type == ast.ASTType.Function else ():
        variables = _Variables()
        variables(argument)
        if argument.ast_type in _BUILT and variables.found:
            return True
    return False


def _reaches(deps: dict[Signature, set[Signature]], start: Signature, goal: Signature) -> bool:
    seen, todo = set(), [start]
    while todo:
        sig = todo.pop()
        if sig == goal:
            return True
        if sig not in seen:
            seen.add(sig)
            todo.extend(deps.get(sig, ()))
    return False


@functools.lru_cache(maxsize=256)
def signatures(text: str) -> Signatures:
    """Analyse program `text` (raises clingo's RuntimeError when it does not parse)."""
    defined: set[Signature] = set()
    atoms = _Atoms()
    deps: dict[Signature, set[Signature]] = {}
    growing: list[tuple[Use, frozenset[Signature]]] = []

    def on_statement(stm: ast.AST) -> None:
        if stm.ast_type == ast.ASTType.Rule:
            body = _Atoms()
            for literal in stm.body:
                body(literal)
            body_sigs = frozenset(u.signature for u in body.uses)
            for atom in _head_atoms(stm.head):
                if atom.ast_type == ast.ASTType.SymbolicAtom and (sig := _signature(atom.symbol)):
                    defined.add(sig)
                    deps.setdefault(sig, set()).update(body_sigs)
                    if _builds_terms(atom):
                        begin = stm.location.begin
                        growing.append((Use(sig, begin.line, begin.column), body_sigs))
        elif stm.ast_type == ast.ASTType.Defined:
            defined.add((stm.name, stm.arity))
        elif stm.ast_type == ast.ASTType.External and (sig := _signature(stm.atom.symbol)):
            defined.add(sig)
        atoms(stm)

    ast.parse_string(text, on_statement)
    unbounded = tuple(
        use for use, body in growing if any(_reaches(deps, b, use.signature) for b in body)
    )
    return Signatures(frozenset(defined), tuple(atoms.uses), unbounded)
