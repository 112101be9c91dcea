"""`cca autoscale replay FILE.json`: the autoscaler's what-if, offline, like `cca plan` for placement.

Runs the live controller's decision code over the file's timeline (format: docs/autoscale.md) and
prints one decision per step (table, or `-o json`: a list of {at, recommended, desired, term,
reasons[, vertical]}). Exit 1 with the field named for a malformed file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ccattler.cli._common import reports_errors

autoscale_app = typer.Typer(help="Autoscaling tools.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(autoscale_app, name="autoscale")


@autoscale_app.command("replay")
@reports_errors
def replay(
    file: Annotated[Path, typer.Argument(help="The replay file (JSON).")],
    output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table",
    time_zone: Annotated[str, typer.Option("--time-zone", help="Time zone of schedule windows.")] = "UTC",
) -> None:
    """Replay a timeline of observations through the autoscaler and print its decisions."""
    if output not in ("table", "json"):
        raise typer.BadParameter(f"expected table or json, got {output!r}", param_hint="-o/--output")
    from ccattler.engine.autoscale.replay import ReplayError, run_file

    try:
        rows = run_file(str(file), check_time_zone(time_zone))
    except ReplayError as exc:
        raise ReplayError(f"{file}: {exc}" if not str(exc).startswith(str(file)) else str(exc)) from None
    if output == "json":
        typer.echo(json.dumps(rows, indent=2))
        return
    typer.echo(f"{'AT':>6}  {'RECOMMENDED':>11}  {'DESIRED':>7}  {'TERM':<28}  REASONS")
    for r in rows:
        extra = ""
        if "vertical" in r:
            extra = f"  [cpu {r['vertical']['cpu_m']}m memory {r['vertical']['memory_mi']}Mi]"
        typer.echo(f"{r['at']:>6}  {r['recommended']:>11}  {r['desired']:>7}  {r['term']:<28}  "
                   f"{'; '.join(r['reasons'])}{extra}")


def check_time_zone(name: str) -> str:
    """`name` if it is a known time zone (else a clear error): replay and `cca server --time-zone`."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from ccattler.engine.autoscale.replay import ReplayError
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ReplayError(f"--time-zone: unknown time zone {name!r} (e.g. UTC, Europe/Berlin)") from None
    return name
