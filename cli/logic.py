"""`cca test [PATH…] [--run REGEX]`: run logic unit tests (`*_test.lp`), like `opa test`.

Prints PASS/FAIL per test with its timing and failure messages, then the rules no test
exercised; exits 1 when a test fails or cannot run. Default path: the shipped `rules/tests`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ccattler.cli._common import reports_errors


def register(app: typer.Typer) -> None:
    app.command("test")(test)


@reports_errors
def test(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Test files or folders (default: rules/tests).")] = None,
    run_pattern: Annotated[str | None, typer.Option(
        "--run", metavar="REGEX", help="Only tests whose <program>.<test> name matches.")] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="List every uncovered rule.")] = False,
) -> None:
    """Run logic unit tests: `#program test_<name>.` parts with expect/expect_not/expect_reject."""
    import re

    from rich.console import Console

    from ccattler.engine.logictest import discover, run
    from ccattler.engine.solve import RULES_DIR

    if run_pattern is not None:
        try:
            re.compile(run_pattern)
        except re.error as exc:
            raise typer.BadParameter(f"not a regular expression: {exc}", param_hint="--run") from None
    console = Console(highlight=False, soft_wrap=True)
    report = run(discover(paths or [RULES_DIR / "tests"]), run_pattern)
    for outcome in report.outcomes:
        where = f"{outcome.file.name}:{outcome.line}"
        mark = "[green]PASS[/green]" if outcome.passed else "[red]FAIL[/red]"
        console.print(f"{mark} {outcome.name} [dim]({where}, {outcome.seconds * 1000:.0f} ms)[/dim]")
        for failure in outcome.failures:
            console.print(f"     {failure}", markup=False)
    passed = len(report.outcomes) - len(report.failed)
    console.print(f"\n{passed}/{len(report.outcomes)} passed")
    if report.rules and not report.filtered:
        uncovered = report.uncovered
        console.print(f"coverage: {len(report.rules) - len(uncovered)}/{len(report.rules)} rules exercised")
        for rule in uncovered if verbose else uncovered[:10]:
            console.print(f"  not exercised: {rule.file.name}:{rule.line}  {rule.text[:90]}", markup=False)
        if not verbose and len(uncovered) > 10:
            console.print(f"  … {len(uncovered) - 10} more (-v lists all)")
    if not report.outcomes:
        console.print("no tests found")
    if report.failed:
        raise typer.Exit(1)
