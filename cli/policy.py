"""`cca policy apply|list|delete`: operator `.lp` policies, validated and effective immediately."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ccattler.cli._common import ContextOpt, OutputOpt, ServerOpt, TokenOpt, client, emit, reports_errors
from ccattler.cli.render import COLUMNS

app = typer.Typer(help="Operator policies written as logic (.lp).", no_args_is_help=True)


@app.command("apply")
@reports_errors
def apply(file: Annotated[Path, typer.Argument(help="A .lp policy file.", exists=True, dir_okay=False)],
          name: Annotated[str | None, typer.Option("--name", help="Name (default: file stem).")] = None,
          program: Annotated[str, typer.Option("--program", help="admission, or netpolicy (an extension "
                                               "loaded after rules/netpolicy.lp).")] = "admission",
          context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Validate and store a policy (it must ground against the admission vocabulary)."""
    from ccattler.engine.netpolicy.extensions import with_directive

    if program not in ("admission", "netpolicy"):
        raise typer.BadParameter(f"expected admission or netpolicy, got {program!r}", param_hint="--program")
    policy = name or file.stem
    text = file.read_text() if program == "admission" else with_directive(file.read_text(), program)
    with client(context, server, token) as api:
        result = api.policy_apply(policy, text)
    verb = "created" if result.get("added") else "configured" if result.get("changed") else "unchanged"
    typer.echo(f"policy {policy} {verb}")


@app.command("list")
@reports_errors
def list_(output: OutputOpt = "table", context: ContextOpt = None, server: ServerOpt = None,
          token: TokenOpt = None) -> None:
    """Declared (`policy` blocks) and operator (.lp) policies."""

    with client(context, server, token) as api:
        items = api.policy_list()
    emit(items, COLUMNS["policies"][0], output)


@app.command("delete")
@reports_errors
def delete(name: Annotated[str, typer.Argument(help="Operator policy name.")],
           context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Remove an operator policy."""

    with client(context, server, token) as api:
        api.policy_delete(name)
    typer.echo(f"policy {name} deleted")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="policy")
