"""Rule coverage for logic tests: each rule of the program under test gets a twin
`cca_covered(I) :- <same body>.`, so a rule counts as exercised when its body held in some test.

Facts and hard constraints (internal invariants: a fired one would leave no model) are not
counted; weak constraints are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import clingo.ast as ast
from clingo import Number

from ccattler.engine.logictest.discover import parse_statements

COVERED = "cca_covered"


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule of the program under test: where it is and how it reads."""

    file: Path
    line: int
    text: str


def _is_constraint(statement: ast.AST) -> bool:
    head = statement.head
    return head.ast_type == ast.ASTType.Literal and head.atom.ast_type == ast.ASTType.BooleanConstant


def instrument(path: Path) -> tuple[list[ast.AST], list[Rule]]:
    """The statements of `path` plus a coverage twin per rule, and the rules in index order."""
    statements = parse_statements(path)
    rules: list[Rule] = []
    out: list[ast.AST] = []
    for statement in statements:
        out.append(statement)
        kind = statement.ast_type
        if kind == ast.ASTType.Rule and (not statement.body or _is_constraint(statement)):
            continue
        if kind not in (ast.ASTType.Rule, ast.ASTType.Minimize):
            continue
        loc = statement.location
        index = len(rules)
        rules.append(Rule(path, loc.begin.line, " ".join(str(statement).split())))
        marker = ast.Function(loc, COVERED, [ast.SymbolicTerm(loc, Number(index))], False)
        head = ast.Literal(loc, ast.Sign.NoSign, ast.SymbolicAtom(marker))
        out.append(ast.Rule(loc, head, statement.body))
    return out, rules
