"""`cca test`: logic unit tests written in the logic itself (`*_test.lp`, `#program test_<name>.`).

`run(discover([Path("rules/tests")]), pattern)` returns a `Report`: PASS/FAIL per test with
timing and failure messages, and the rules of each program under test that no test exercised.
"""

from ccattler.engine.logictest.coverage import Rule
from ccattler.engine.logictest.discover import LogicTest, LogicTestError, TestFile, discover, test_files
from ccattler.engine.logictest.runner import TEST_OPTIONS, Outcome, Report, run

__all__ = [
    "TEST_OPTIONS",
    "LogicTest",
    "LogicTestError",
    "Outcome",
    "Report",
    "Rule",
    "TestFile",
    "discover",
    "run",
    "test_files",
]
