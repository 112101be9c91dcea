"""The `cca test` runner: discovery, expectations, duplicates, errors, coverage and exit codes."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ccattler.cli.main import app
from ccattler.engine.logictest import LogicTestError, discover, run
from ccattler.engine.solve import LogicSyntaxError

PROGRAM = """
#defined item/1.
big(X) :- item(X), X > 5.
small(X) :- item(X), X <= 5.
reject(X, bag, too_big, X) :- big(X).
"""


def layout(tmp_path: Path, tests: str) -> Path:
    (tmp_path / "bag.lp").write_text(PROGRAM)
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "bag_test.lp").write_text(tests)
    return folder


def test_pass_fail_and_messages(tmp_path):
    folder = layout(tmp_path, """
#program test_big.
item(7). expect(big(7)). expect_reject(too_big). expect(reject(7, bag, too_big, 7)).
#program test_wrong.
item(3). expect(big(3)). expect_not(small(3)). expect_reject(too_big).
""")
    report = run(discover([folder]))
    by_name = {o.name: o for o in report.outcomes}
    assert by_name["test_big"].passed
    failures = by_name["test_wrong"].failures
    assert any("expected big(3)" in f for f in failures)
    assert any("expected no small(3)" in f for f in failures)
    assert any("code too_big" in f for f in failures)


def test_duplicate_test_names_are_refused(tmp_path):
    folder = layout(tmp_path, "#program test_a.\nitem(1). expect(small(1)).\n#program test_a.\nitem(9).\n")
    with pytest.raises(LogicTestError, match="duplicate test test_a"):
        discover([folder])


def test_syntax_error_in_test_file_names_position(tmp_path):
    folder = layout(tmp_path, "#program test_a.\nitem(1.\n")
    with pytest.raises(LogicSyntaxError, match=r"bag_test.lp:2:"):
        discover([folder])


def test_missing_program_is_reported(tmp_path):
    (tmp_path / "nothing_test.lp").write_text("#program test_a.\n")
    with pytest.raises(LogicTestError, match="no program nothing.lp"):
        discover([tmp_path])


def test_coverage_lists_rules_no_test_exercised(tmp_path):
    folder = layout(tmp_path, "#program test_small.\nitem(2). expect(small(2)).\n")
    report = run(discover([folder]))
    assert sorted(r.line for r in report.uncovered) == [3, 5]


def test_run_filter_and_cli_exit_codes(tmp_path):
    folder = layout(tmp_path, """
#program test_ok.
item(2). expect(small(2)).
#program test_bad.
item(2). expect(big(2)).
""")
    runner = CliRunner()
    ok = runner.invoke(app, ["test", str(folder), "--run", "ok$"])
    assert ok.exit_code == 0, ok.output
    assert "PASS test_ok" in ok.output and "test_bad" not in ok.output
    bad = runner.invoke(app, ["test", str(folder)])
    assert bad.exit_code == 1
    assert "FAIL test_bad" in bad.output and "expected big(2)" in bad.output
    assert "coverage:" in bad.output


def test_cli_reports_collection_errors_without_traceback(tmp_path):
    folder = layout(tmp_path, "#program test_a.\nitem(1.\n")
    result = CliRunner().invoke(app, ["test", str(folder)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
