"""`cca plan FILE…`: place a file's services on its `node` blocks offline, with no cluster.

Prints the placements and the unplaced instances with their reasons (`-o json` prints exactly
`{"placements": […], "unplaced": […]}`); `--explain SERVICE|INSTANCE` prints why that service
runs where it does, why the other nodes were filtered, and what blocks its unplaced replicas.
Exit 0 even when some instances are unplaced; 1 for invalid input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ccattler.cli._common import reports_errors
from ccattler.engine.facts.keys import DESIRED_NETWORKS


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


@reports_errors
def plan(
    files: Annotated[list[Path], typer.Argument(help=".cca files (or directories) to plan.")],
    output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table",
    explain: Annotated[str | None, typer.Option("--explain", metavar="SERVICE|INSTANCE",
                                                help="Explain one service's placement.")] = None,
    rules: Annotated[list[Path] | None, typer.Option(
        "--rules", metavar="DIR", help="Operator .lp extension directory (repeatable).")] = None,
) -> None:
    """Place the services of FILE… on its node blocks (simulated nodes) and show the result."""
    if output not in ("table", "json"):
        raise typer.BadParameter(f"expected table or json, got {output!r}", param_hint="-o/--output")
    from rich.console import Console

    from ccattler.dsl import compile_sources, load_sources
    from ccattler.engine.placement import PlanOptions
    from ccattler.engine.placement.explain import explain as explain_target
    from ccattler.engine.placement.offline import PlanReport, simulate

    facts = compile_sources(load_sources(files))
    options = PlanOptions(extensions=tuple(rules or ()))
    snapshot = simulate(facts, options)
    if explain is not None:
        answer = explain_target(snapshot, explain, options)
        if output == "json":
            typer.echo(json.dumps(answer.to_json(), indent=2))
        else:
            Console().print(answer)
        return
    report = PlanReport.from_snapshot(snapshot)
    if output == "json":
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        Console().print(report)
        from ccattler.engine.netpolicy.effect import summary_lines

        network = summary_lines(facts) if any(k.startswith(DESIRED_NETWORKS) for k in facts) else []
        if network:
            typer.echo("\nnetwork policy:")
            typer.echo("\n".join(f"  {line}" for line in network))
