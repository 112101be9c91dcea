"""The logic unit tests of rules/tests (`*_test.lp`) under pytest: one pytest test per logic test."""

import pytest

from ccattler.engine.logictest import discover, run
from ccattler.engine.solve import RULES_DIR

FILES = discover([RULES_DIR / "tests"])
CASES = [(f, t) for f in FILES for t in f.tests]


@pytest.mark.parametrize(("test_file", "test"), [pytest.param(f, t, id=f"{f.program.stem}.{t.name}")
                                                 for f, t in CASES])
def test_logic(test_file, test):
    report = run([test_file], pattern=rf"\.{test.name}$")
    (outcome,) = report.outcomes
    assert outcome.passed, "\n".join(outcome.failures)


def test_placement_logic_tests_exist():
    assert any(f.program == RULES_DIR / "placement.lp" and len(f.tests) >= 25 for f in FILES)


def test_placement_rules_all_exercised():
    placement = [f for f in FILES if f.program.stem == "placement"]
    report = run(placement)
    assert not report.failed
    assert [f"{r.line}: {r.text}" for r in report.uncovered] == []


def test_netpolicy_rules_all_exercised():
    netpolicy = [f for f in FILES if f.program.stem == "netpolicy"]
    report = run(netpolicy)
    assert not report.failed
    assert [f"{r.line}: {r.text}" for r in report.uncovered] == []
