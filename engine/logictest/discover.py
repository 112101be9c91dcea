"""Find logic tests: `*_test.lp` files whose `#program test_<name>.` parts are the tests.

`placement_test.lp` tests `placement.lp` (looked up next to the tests folder, then in the shipped
`rules/`). A `%! parts: base place why` line in a test file names the program parts to ground
(default: every parameterless part of the program); `%! parts test_x: base place check` does so
for one test. Duplicate test names are an error, since
clingo would silently merge parts of the same name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import clingo.ast

from ccattler.engine.solve.errors import LogicError, LogicSyntaxError, MessageLog
from ccattler.engine.solve.program import RULES_DIR

TEST_SUFFIX = "_test.lp"
TEST_PREFIX = "test_"


class LogicTestError(LogicError):
    """Logic tests cannot be collected (duplicate names, no program under test, bad paths)."""


@dataclass(frozen=True, slots=True)
class LogicTest:
    name: str  # the part name, `test_<name>`
    file: Path
    line: int


@dataclass(frozen=True, slots=True)
class TestFile:
    path: Path
    program: Path  # the program under test
    parts: tuple[str, ...] | None
    tests: tuple[LogicTest, ...]
    test_parts: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def parts_for(self, test: str) -> tuple[str, ...] | None:
        return self.test_parts.get(test, self.parts)


def parse_statements(path: Path) -> list[clingo.ast.AST]:
    """The statements of a `.lp` file; syntax errors become `LogicSyntaxError` with file:line:col."""
    log = MessageLog()
    statements: list[clingo.ast.AST] = []
    try:
        clingo.ast.parse_files([str(path)], statements.append, logger=log, message_limit=20)
    except RuntimeError:
        raise LogicSyntaxError(log.summary()) from None
    return statements


def _program_for(path: Path) -> Path:
    stem = path.name[: -len(TEST_SUFFIX)]
    for directory in (path.parent.parent, path.parent, RULES_DIR):
        candidate = directory / f"{stem}.lp"
        if candidate.is_file():
            return candidate
    raise LogicTestError(f"{path}: no program {stem}.lp next to its folder or in {RULES_DIR}")


def _parts_directives(path: Path) -> tuple[tuple[str, ...] | None, dict[str, tuple[str, ...]]]:
    """The file's `%! parts:` line and its per-test `%! parts test_x:` lines."""
    default: tuple[str, ...] | None = None
    per_test: dict[str, tuple[str, ...]] = {}
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text.startswith("%! parts"):
            continue
        head, _, parts = text[len("%! parts"):].partition(":")
        names = tuple(parts.replace(",", " ").split())
        if head.strip():
            per_test[head.strip()] = names
        else:
            default = names
    return default, per_test


def test_files(paths: Iterable[Path]) -> list[Path]:
    """The `*_test.lp` files named or found (recursively) under the given paths, sorted."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            found.extend(sorted(path.rglob(f"*{TEST_SUFFIX}")))
        elif path.is_file():
            found.append(path)
        else:
            raise LogicTestError(f"{path}: no such file or directory")
    return sorted(set(found))


def discover(paths: Iterable[Path]) -> list[TestFile]:
    """Every test file under `paths` with its tests; duplicate test names are refused."""
    files = []
    seen: dict[tuple[Path, str], LogicTest] = {}
    for path in test_files(paths):
        program = _program_for(path)
        tests = []
        for statement in parse_statements(path):
            if statement.ast_type != clingo.ast.ASTType.Program:
                continue
            if not statement.name.startswith(TEST_PREFIX):
                continue
            test = LogicTest(statement.name, path, statement.location.begin.line)
            earlier = seen.get((program, test.name))
            if earlier is not None:
                raise LogicTestError(
                    f"{path}:{test.line}: duplicate test {test.name} "
                    f"(first at {earlier.file}:{earlier.line}); clingo would merge the two parts"
                )
            seen[program, test.name] = test
            tests.append(test)
        default, per_test = _parts_directives(path)
        files.append(TestFile(path, program, default, tuple(tests), per_test))
    return files
