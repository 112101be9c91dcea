"""The logic tests in rules/tests/admission_test.lp, each part grounded with rules/admission.lp.

(`cca test` runs the same file; this keeps it in CI until then and asserts each expectation.)
"""

from __future__ import annotations

import re

import pytest

from ccattler.engine.solve import RULES_DIR, Session, load_program

TEST_FILE = RULES_DIR / "tests" / "admission_test.lp"
PARTS = re.findall(r"^#program (test_\w+)\.", TEST_FILE.read_text(), re.M)


def test_part_names_are_unique():
    assert len(PARTS) == len(set(PARTS))


@pytest.mark.parametrize("part", PARTS)
def test_logic(part):
    session = Session(load_program("admission").with_files([TEST_FILE]))
    session.ground([("base", ()), (part, ())])
    atoms = set(session.solve(atoms="all").symbols)
    expects = [a.arguments[0] for a in atoms if a.match("expect", 1)]
    expect_nots = [a.arguments[0] for a in atoms if a.match("expect_not", 1)]
    codes = {a.arguments[0] for a in atoms if a.match("expect_reject", 1)}
    assert expects or expect_nots or codes, f"{part} expects nothing"
    rejects = sorted(str(a) for a in atoms if a.match("reject", 4))
    for atom in expects:
        assert atom in atoms, f"{part}: expected {atom}; rejects: {rejects}"
    for atom in expect_nots:
        assert atom not in atoms, f"{part}: did not expect {atom}"
    for code in codes:
        assert any(a.match("reject", 4) and a.arguments[2] == code for a in atoms), f"{part}: no {code}"
