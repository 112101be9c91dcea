"""Where logic programs come from: `rules/<name>.lp`, operator extension directories and policy texts.

A `Program` is an ordered list of sources; `load_program("placement", extensions=[dir])` gives
`rules/placement.lp` followed by every `*.lp` in each extension directory (sorted by name).
`rules/lib/*.lp` helpers would be pulled in by the program itself with `#include "lib/<file>.lp".`
(none exist today).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ccattler.engine.solve.errors import ProgramNotFound

#: The shipped programs (the `rules/` folder of the package).
RULES_DIR = Path(__file__).resolve().parents[2] / "rules"


@dataclass(frozen=True, slots=True)
class Source:
    """One piece of a program: a file on disk, a named text (an operator policy from the store), or
    parsed statements (clingo.ast, e.g. a program instrumented for test coverage)."""

    label: str
    path: Path | None = None
    text: str | None = None
    statements: tuple[object, ...] | None = None


@dataclass(frozen=True, slots=True)
class Program:
    """The sources of one controller program, loaded in order into one clingo Control."""

    name: str
    sources: tuple[Source, ...]

    def with_texts(self, texts: Iterable[tuple[str, str]]) -> Program:
        """This program plus named texts (e.g. `("desired/lp/no-latest", "…")`)."""
        extra = tuple(Source(label, text=text) for label, text in texts)
        return Program(self.name, self.sources + extra)

    def with_files(self, paths: Iterable[Path]) -> Program:
        """This program plus more files (a test file, a fixture)."""
        return Program(self.name, self.sources + tuple(Source(str(p), path=Path(p)) for p in paths))


def program_path(name: str, rules_dir: Path = RULES_DIR) -> Path:
    """The file of program `name`, checked to exist."""
    path = rules_dir / f"{name}.lp"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in rules_dir.glob("*.lp"))) or "none"
        raise ProgramNotFound(f"no logic program {name!r} in {rules_dir} (known: {known})")
    return path


def load_program(
    name: str, extensions: Sequence[Path] = (), rules_dir: Path = RULES_DIR
) -> Program:
    """`rules/<name>.lp` followed by the `*.lp` files of each extension directory, in name order."""
    sources = [Source(str(program_path(name, rules_dir)), path=program_path(name, rules_dir))]
    for directory in extensions:
        directory = Path(directory)
        if not directory.is_dir():
            raise ProgramNotFound(f"extension directory {directory} does not exist")
        sources.extend(Source(str(p), path=p) for p in sorted(directory.glob("*.lp")))
    return Program(name, tuple(sources))


def program_from_text(name: str, text: str, label: str | None = None) -> Program:
    """A program given as text (tests, tools); `label` names it in error messages."""
    return Program(name, (Source(label or f"<{name}>", text=text),))
