"""One clingo Control per program: load sources, add typed facts, ground, solve within a budget.

Solving is deterministic: one thread, a fixed configuration and seed, and a budget counted in
conflicts (`SolveOptions.conflicts`, clingo's `--solve-limit`); the wall-clock cap
(`SolveOptions.wall_seconds`) is only a safety net. The best model found is kept; a proof of
optimality is never required.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import clingo
import clingo.ast
from clingo import Symbol

from ccattler.engine.solve.errors import GroundingError, MessageLog, map_clingo_errors
from ccattler.engine.solve.program import Program


@dataclass(frozen=True, slots=True)
class SolveOptions:
    """The solver's budget and mode; the defaults suit a controller tick."""

    #: Budget in solver work: stop the search after this many conflicts (None: no limit).
    conflicts: int | None = 20_000
    #: Safety net only: cancel the search after this many seconds (breaks determinism when hit).
    wall_seconds: float = 30.0
    seed: int = 0
    #: Optimise (branch and bound over the program's weak constraints) or take the first model.
    optimize: bool = True
    #: When optimising, first try core-guided optimisation (usc) with this many conflicts; if it
    #: finds no model, branch-and-bound runs with `conflicts`. None: branch-and-bound only.
    core_guided_conflicts: int | None = None
    #: More clingo command-line options, for experiments.
    extra: tuple[str, ...] = ()

    def arguments(self) -> list[str]:
        args = ["--parallel-mode=1", f"--seed={self.seed}", "--warn=none"]
        args.append("--opt-mode=opt" if self.optimize else "--opt-mode=ignore")
        if self.conflicts is not None:
            args.append(f"--solve-limit={self.conflicts}")
        return [*args, *self.extra]


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of one solve: the best model's atoms and how good it is known to be."""

    #: The best model's atoms (shown atoms, or all atoms with `atoms="all"`), sorted; empty if none.
    symbols: tuple[Symbol, ...]
    #: True: a model was found; False: proven unsatisfiable; None: budget ran out before either.
    satisfiable: bool | None
    cost: tuple[int, ...] = ()
    #: True when the search finished, so the model is proven optimal (or the first one, unoptimised).
    exhausted: bool = False
    models: int = 0
    #: The assumption literals of an unsatisfiable core (only when solving with assumptions).
    core: tuple[int, ...] = ()
    solve_seconds: float = 0.0
    timed_out: bool = False

    def atoms(self, name: str, arity: int | None = None) -> list[Symbol]:
        """The model's atoms of predicate `name` (any arity unless given)."""
        return [
            s for s in self.symbols
            if s.name == name and (arity is None or len(s.arguments) == arity)
        ]


@dataclass(slots=True)
class Session:
    """A loaded program in its own Control; add facts, ground parts and solve (multi-shot)."""

    program: Program
    options: SolveOptions = field(default_factory=SolveOptions)
    ground_seconds: float = 0.0
    _log: MessageLog = field(default_factory=MessageLog)
    _ctl: clingo.Control = field(init=False)

    def __post_init__(self) -> None:
        self._ctl = clingo.Control(self.options.arguments(), logger=self._log, message_limit=50)
        for source in self.program.sources:
            self._log.label = source.label
            with map_clingo_errors(self._log, "parse"):
                if source.statements is not None:
                    with clingo.ast.ProgramBuilder(self._ctl) as builder:
                        for statement in source.statements:
                            builder.add(statement)
                elif source.path is not None:
                    self._ctl.load(str(source.path))
                else:
                    self._ctl.add("base", [], source.text or "")
        self._log.label = None

    @property
    def control(self) -> clingo.Control:
        """The underlying Control, for callers that need clingo directly (e.g. coverage)."""
        return self._ctl

    def add_facts(self, facts: Iterable[Symbol]) -> None:
        """Add ground atoms as facts through the backend (never as program text)."""
        with self._ctl.backend() as backend:
            for fact in facts:
                backend.add_rule([backend.add_atom(fact)])

    def add_assumable(self, atoms: Iterable[Symbol]) -> dict[Symbol, int]:
        """Add atoms as free externals, decided by `solve(assumptions=…)` (+lit true, -lit false);
        returns each atom's literal."""
        literals: dict[Symbol, int] = {}
        with self._ctl.backend() as backend:
            for atom_ in atoms:
                literal = backend.add_atom(atom_)
                backend.add_external(literal, clingo.TruthValue.Free)
                literals[atom_] = literal
        return literals

    def ground(self, parts: Sequence[tuple[str, Sequence[Symbol]]] = (("base", ()),)) -> None:
        """Ground the named program parts (clingo errors become `GroundingError`)."""
        start = time.perf_counter()
        with map_clingo_errors(self._log, "ground"):
            self._ctl.ground([(name, list(args)) for name, args in parts])
        self.ground_seconds += time.perf_counter() - start

    def facts(self, name: str, arity: int) -> list[Symbol]:
        """Atoms of `name/arity` that grounding already decided true (no solving needed)."""
        return [
            a.symbol for a in self._ctl.symbolic_atoms.by_signature(name, arity) if a.is_fact
        ]

    def solve(
        self,
        assumptions: Sequence[int] = (),
        atoms: str = "shown",
        optimize: bool | None = None,
    ) -> Result:
        """Solve within the budget and return the best model; `atoms="all"` returns every atom.

        With `SolveOptions.core_guided_conflicts`, optimisation first runs core-guided (usc), which
        proves small problems optimal almost at once; if that finds no model within its budget,
        branch-and-bound (with the program's heuristics) runs with the main budget."""
        if optimize is not None:
            self._ctl.configuration.solve.opt_mode = "opt" if optimize else "ignore"
        optimizing = optimize if optimize is not None else self.options.optimize
        first = self.options.core_guided_conflicts if optimizing else None
        if first is None:
            return self._solve_once(assumptions, atoms)
        config = self._ctl.configuration
        strategy = config.solver.opt_strategy
        config.solver.opt_strategy = "usc"
        config.solve.solve_limit = str(first)
        try:
            result = self._solve_once(assumptions, atoms)
        finally:
            config.solver.opt_strategy = strategy
            config.solve.solve_limit = self._limit()
        if result.satisfiable is not None:
            return result
        second = self._solve_once(assumptions, atoms)
        return dataclasses.replace(second, solve_seconds=second.solve_seconds + result.solve_seconds)

    def _limit(self) -> str:
        return "umax,umax" if self.options.conflicts is None else str(self.options.conflicts)

    def _solve_once(self, assumptions: Sequence[int], atoms: str) -> Result:
        best: list[Symbol] = []
        cost: list[int] = []
        count = 0

        def on_model(model: clingo.Model) -> None:
            nonlocal best, cost, count
            best = model.symbols(atoms=True) if atoms == "all" else model.symbols(shown=True)
            cost = list(model.cost)
            count += 1

        start = time.perf_counter()
        try:
            with self._ctl.solve(
                assumptions=list(assumptions), on_model=on_model, async_=True
            ) as handle:
                finished = handle.wait(self.options.wall_seconds)
                if not finished:
                    handle.cancel()
                outcome = handle.get()
                core = handle.core() if outcome.unsatisfiable and assumptions else []
        except RuntimeError as exc:
            raise GroundingError(f"solving {self.program.name} failed: {exc}") from None
        satisfiable = True if count else (False if outcome.unsatisfiable else None)
        return Result(
            symbols=tuple(sorted(best)),
            satisfiable=satisfiable,
            cost=tuple(cost),
            exhausted=bool(outcome.exhausted),
            models=count,
            core=tuple(core),
            solve_seconds=time.perf_counter() - start,
            timed_out=not finished,
        )


def solve(
    program: Program,
    facts: Iterable[Symbol],
    parts: Sequence[tuple[str, Sequence[Symbol]]] = (("base", ()),),
    options: SolveOptions | None = None,
    atoms: str = "shown",
) -> Result:
    """One shot: load `program`, add `facts`, ground `parts`, solve."""
    session = Session(program, options or SolveOptions())
    session.add_facts(facts)
    session.ground(parts)
    return session.solve(atoms=atoms)
