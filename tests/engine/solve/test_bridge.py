from dataclasses import dataclass
from pathlib import Path

import pytest

from ccattler.engine.facts import CcaError
from ccattler.engine.solve import (
    Const,
    GroundingError,
    LogicSyntaxError,
    ProgramNotFound,
    Reject,
    Session,
    SolveOptions,
    SymbolRangeError,
    atom,
    decode,
    load_program,
    program_from_text,
    solve,
)

KNAPSACK = """
#defined item/2.
{ take(I) } :- item(I, _).
:- #sum { W,I : take(I), item(I, W) } > 10.
:~ item(I, W), not take(I). [W@1, I]
reject(I, bag, too_heavy, (W, 10)) :- item(I, W), W > 10.
#show take/1.
#show reject/4.
"""


@dataclass(frozen=True, slots=True)
class Take:
    item: str


def items(*weights):
    return [atom("item", f"i{n}", w) for n, w in enumerate(weights)]


def test_facts_go_through_backend_and_decode_to_dataclasses():
    result = solve(program_from_text("bag", KNAPSACK), items(4, 6, 7, 12))
    assert result.satisfiable is True
    taken = sorted(t.item for t in decode(result.symbols, Take))
    assert taken == ["i0", "i1"]
    (reject,) = decode(result.symbols, Reject)
    assert reject == Reject("i3", Const("bag"), Const("too_heavy"), (12, 10))
    assert reject.arguments == (12, 10)


def test_same_facts_give_same_result():
    facts = items(*range(1, 30))
    first = solve(program_from_text("bag", KNAPSACK), facts, options=SolveOptions(conflicts=50))
    for _ in range(3):
        again = solve(program_from_text("bag", KNAPSACK), facts, options=SolveOptions(conflicts=50))
        assert again.symbols == first.symbols and again.cost == first.cost


def test_budget_keeps_best_model_without_proof():
    facts = items(*range(1, 40))
    result = solve(program_from_text("bag", KNAPSACK), facts, options=SolveOptions(conflicts=1))
    assert result.satisfiable is True
    assert result.models >= 1


def test_syntax_error_in_text_names_label_line_col():
    program = program_from_text("bag", "ok.\np(X :- q.\n", label="desired/lp/broken")
    with pytest.raises(LogicSyntaxError) as info:
        Session(program)
    assert str(info.value).startswith("desired/lp/broken:2:")
    assert isinstance(info.value, CcaError)


def test_unsafe_variable_in_operator_file_is_grounding_error(tmp_path: Path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "demo.lp").write_text("a.\n")
    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "policy.lp").write_text("% operator policy\nq(X) :- not r(X).\n")
    session = Session(load_program("demo", extensions=[ext], rules_dir=rules))
    with pytest.raises(GroundingError) as info:
        session.ground()
    message = str(info.value)
    assert f"{ext / 'policy.lp'}:2:1" in message and "unsafe" in message


def test_unknown_program_and_missing_extension(tmp_path: Path):
    with pytest.raises(ProgramNotFound, match="no logic program 'nope'"):
        load_program("nope", rules_dir=tmp_path)
    (tmp_path / "demo.lp").write_text("a.\n")
    with pytest.raises(ProgramNotFound, match="does not exist"):
        load_program("demo", extensions=[tmp_path / "missing"], rules_dir=tmp_path)


def test_integer_outside_32_bits_is_refused():
    with pytest.raises(SymbolRangeError, match="32 bits"):
        atom("mem", "n1", 64 * 2**30)


def test_facts_decided_by_grounding_need_no_solve():
    session = Session(program_from_text("p", "big(I) :- item(I, W), W > 5."))
    session.add_facts(items(3, 9))
    session.ground()
    assert [str(s) for s in session.facts("big", 1)] == ['big("i1")']


def test_unsat_core_over_assumable_facts():
    session = Session(program_from_text("p", ":- a, b.\nc."), SolveOptions(optimize=False))
    literals = session.add_assumable([atom("a"), atom("b"), atom("c2")])
    session.ground()
    result = session.solve(assumptions=list(literals.values()))
    assert result.satisfiable is False
    assert set(result.core) <= set(literals.values())
    assert {literals[atom("a")], literals[atom("b")]} <= set(result.core)


def test_core_guided_first_proves_small_problems_optimal():
    options = SolveOptions(conflicts=10, core_guided_conflicts=5_000)
    result = solve(program_from_text("bag", KNAPSACK), items(3, 4, 5, 6, 7), options=options)
    assert result.satisfiable is True and result.exhausted is True
    assert result.cost == (15,)  # 25 in all, 10 fit: 3 + 7 or 4 + 6
    assert sorted(t.item for t in decode(result.symbols, Take)) in (["i0", "i4"], ["i1", "i3"])


def test_parsed_statements_are_a_source():
    import clingo.ast

    from ccattler.engine.solve import Program, Source

    statements: list = []
    clingo.ast.parse_string("p(1). q(X) :- p(X).", statements.append)
    session = Session(Program("p", (Source("<parsed>", statements=tuple(statements)),)))
    session.ground()
    assert [str(s) for s in session.facts("q", 1)] == ["q(1)"]
