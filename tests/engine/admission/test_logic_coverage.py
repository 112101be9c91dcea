"""rules/tests/admission_test.lp (run per test by tests/rules/test_logic.py) exercises every rule."""

from ccattler.engine.logictest import discover, run
from ccattler.engine.solve import RULES_DIR


def test_admission_rules_all_exercised():
    files = [f for f in discover([RULES_DIR / "tests"]) if f.program.stem == "admission"]
    report = run(files)
    assert not report.failed
    assert len(report.outcomes) >= 15
    assert [f"{r.line}: {r.text}" for r in report.uncovered] == []
