"""The clingo bridge: load a `rules/<name>.lp` program, add typed facts, ground, solve, decode.

Usage (any program, any facts, any output predicates)::

    from ccattler.engine.solve import Session, SolveOptions, atom, decode, load_program, Reject

    program = load_program("admission", extensions=[Path("/etc/ccattler/policies")])
    program = program.with_texts([("desired/lp/no-latest", operator_text)])   # policy texts
    session = Session(program, SolveOptions(conflicts=10_000))
    session.add_facts([atom("service", "default/web"), atom("image", "default/web", "busybox")])
    session.ground()                                  # or ground([("base", ()), ("part", ())])
    result = session.solve()                          # best model within the budget
    denies = decode(result.symbols, Deny)             # Deny: a frozen dataclass, PREDICATE="deny"

- Facts are typed symbols built by `atom(name, *args)` (str → String, int → Number checked to 32
  bits, tuple → tuple term, `Const("x")` → constant `x`) and added through clingo's backend;
  program text is never built from data.
- Determinism: one thread, fixed seed, a budget in conflicts (`SolveOptions.conflicts`) and a
  wall-clock cap only as a safety net (`SolveOptions.wall_seconds`). `Result.exhausted` says
  whether the model is proven optimal; it never has to be. `SolveOptions.core_guided_conflicts`
  first tries core-guided optimisation (fast proofs on small problems), then branch-and-bound.
  Program heuristics (`#heuristic`) need `SolveOptions(extra=("--heuristic=Domain",))`.
- Parsed statements can be loaded too (`Source(label, statements=…)`, e.g. instrumented ones).
- `Session.facts(name, arity)` reads atoms grounding already decided (stratified parts need no
  solve); `Session.add_assumable(atoms)` + `solve(assumptions=…)` give unsat cores (`Result.core`).
- Errors: syntax errors in any source raise `LogicSyntaxError`, unsafe variables and other
  grounding failures `GroundingError`, each with `file:line:col: error: …` (a text source is
  named by its label); an integer outside 32 bits raises `SymbolRangeError`. All are `CcaError`s.
- `solve(program, facts, parts, options)` is the one-shot form.
"""

from ccattler.engine.solve.decode import Reject, args_tuple, decode, predicate_of
from ccattler.engine.solve.errors import (
    GroundingError,
    LogicError,
    LogicSyntaxError,
    ProgramNotFound,
    SymbolRangeError,
)
from ccattler.engine.solve.program import (
    RULES_DIR,
    Program,
    Source,
    load_program,
    program_from_text,
    program_path,
)
from ccattler.engine.solve.solver import Result, Session, SolveOptions, solve
from ccattler.engine.solve.symbols import Const, atom, to_python, to_symbol

__all__ = [
    "RULES_DIR",
    "Const",
    "GroundingError",
    "LogicError",
    "LogicSyntaxError",
    "Program",
    "ProgramNotFound",
    "Reject",
    "Result",
    "Session",
    "SolveOptions",
    "Source",
    "SymbolRangeError",
    "args_tuple",
    "atom",
    "decode",
    "load_program",
    "predicate_of",
    "program_from_text",
    "program_path",
    "solve",
    "to_python",
    "to_symbol",
]
