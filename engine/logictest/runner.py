"""Run logic tests: one clingo Control per test (program under test + the test file), ground the
program's parts and the test's part, solve to the best model, check its expectations.

Expectations are facts of the test part: `expect(Atom)` (Atom in the model), `expect_not(Atom)`
(Atom not in it) and `expect_reject(Code)` (some `reject(_, _, Code, _)` in it). The budget is
`TEST_OPTIONS` (large enough that small fixtures reach their optimum).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import clingo.ast as ast
from clingo import Symbol

from ccattler.engine.logictest.coverage import COVERED, Rule, instrument
from ccattler.engine.logictest.discover import TestFile, parse_statements
from ccattler.engine.solve.errors import LogicError
from ccattler.engine.solve.program import Program, Source
from ccattler.engine.solve.solver import Session, SolveOptions

TEST_OPTIONS = SolveOptions(conflicts=200_000, wall_seconds=60.0)


@dataclass(frozen=True, slots=True)
class Outcome:
    name: str
    file: Path
    line: int
    passed: bool
    seconds: float
    failures: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Report:
    outcomes: tuple[Outcome, ...]
    rules: tuple[Rule, ...]
    covered: frozenset[int]
    filtered: bool  # --run chose a subset, so coverage is partial

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.passed]

    @property
    def uncovered(self) -> list[Rule]:
        return [r for i, r in enumerate(self.rules) if i not in self.covered]


def _program_parts(path: Path) -> tuple[str, ...]:
    parts = ["base"]
    for statement in parse_statements(path):
        is_part = statement.ast_type == ast.ASTType.Program and not statement.parameters
        if is_part and statement.name not in parts:
            parts.append(statement.name)
    return tuple(parts)


def _check(symbols: set[Symbol]) -> list[str]:
    failures = []
    rejects = [s for s in symbols if s.name == "reject" and len(s.arguments) == 4]
    for sym in sorted(symbols):
        if sym.name == "expect" and len(sym.arguments) == 1:
            want = sym.arguments[0]
            if want not in symbols:
                near = sorted(str(s) for s in symbols if s.name == want.name)[:5]
                failures.append(f"expected {want}; the model has {', '.join(near) or f'no {want.name} atom'}")
        elif sym.name == "expect_not" and len(sym.arguments) == 1:
            if sym.arguments[0] in symbols:
                failures.append(f"expected no {sym.arguments[0]}, but the model has it")
        elif sym.name == "expect_reject" and len(sym.arguments) == 1:
            code = sym.arguments[0]
            if not any(r.arguments[2] == code for r in rejects):
                codes = sorted({str(r.arguments[2]) for r in rejects})
                present = ", ".join(codes) or "none"
                failures.append(f"expected a reject with code {code}; codes present: {present}")
    if not any(s.name.startswith("expect") for s in symbols):
        failures.append("the test states no expect/expect_not/expect_reject")
    return failures


def run(
    files: Iterable[TestFile], pattern: str | None = None, options: SolveOptions = TEST_OPTIONS
) -> Report:
    """Run every test (matching `pattern`, a regular expression searched in `<program>.<test>`)."""
    selector = re.compile(pattern) if pattern else None
    outcomes: list[Outcome] = []
    all_rules: list[Rule] = []
    covered: set[int] = set()
    instrumented: dict[Path, tuple[list, list[Rule], int]] = {}
    for test_file in files:
        if test_file.program not in instrumented:
            statements, rules = instrument(test_file.program)
            instrumented[test_file.program] = (statements, rules, len(all_rules))
            all_rules.extend(rules)
        statements, _, offset = instrumented[test_file.program]
        all_parts = _program_parts(test_file.program)
        for test in test_file.tests:
            parts = test_file.parts_for(test.name) or all_parts
            if selector and not selector.search(f"{test_file.program.stem}.{test.name}"):
                continue
            program = Program(test_file.program.stem, (
                Source(str(test_file.program), statements=tuple(statements)),
                Source(str(test_file.path), path=test_file.path),
            ))
            start = time.perf_counter()
            try:
                session = Session(program, options)
                session.ground([(p, ()) for p in (*parts, test.name)])
                result = session.solve(atoms="all")
            except LogicError as exc:
                outcomes.append(Outcome(test.name, test.file, test.line, False,
                                        time.perf_counter() - start, (str(exc),)))
                continue
            symbols = set(result.symbols)
            failures = _check(symbols) if result.satisfiable else ["no model (the fixture is contradictory)"]
            covered.update(offset + s.arguments[0].number for s in symbols if s.name == COVERED)
            outcomes.append(Outcome(test.name, test.file, test.line, not failures,
                                    time.perf_counter() - start, tuple(failures)))
    return Report(tuple(outcomes), tuple(all_rules), frozenset(covered), selector is not None)
