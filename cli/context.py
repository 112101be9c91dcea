"""`cca context list|use`: the contexts in $CCA_HOME/config.yaml, like `kubectl config`."""

from __future__ import annotations

from typing import Annotated

import typer

from ccattler.cli._common import OutputOpt, emit, reports_errors

app = typer.Typer(help="Client contexts (clusters and credentials).", no_args_is_help=True)


@app.command("list")
@reports_errors
def list_(output: OutputOpt = "table") -> None:
    """Every context; the current one is marked with *."""
    from ccattler.engine.clientconfig import load_config

    config = load_config()
    rows = [{"current": "*" if name == config.current else " ", "name": name, "server": c.server,
             "auth": "token" if c.token else ("certificate " + (c.cert or "")) if c.cert else "none"}
            for name, c in sorted(config.contexts.items())]
    emit(rows, [("current", lambda r: r["current"]), ("name", lambda r: r["name"]),
                ("server", lambda r: r["server"]), ("auth", lambda r: r["auth"])], output)


@app.command("use")
@reports_errors
def use(name: Annotated[str, typer.Argument(help="Context to make current.")]) -> None:
    """Make a context the current one."""
    from ccattler.engine.clientconfig import load_config, save_context

    save_context(load_config().context(name), make_current=True)
    typer.echo(f"current context is {name!r}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="context")
