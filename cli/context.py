"""`cca context list|use`: the contexts in $CCA_HOME/config.yaml, like `kubectl config`."""

from __future__ import annotations

from pathlib import Path
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


@app.command("add")
@reports_errors
def add(name: Annotated[str, typer.Argument(help="Name of the new context.")],
        server: Annotated[str, typer.Option("--server", help="The API server's HOST:PORT.")],
        ca: Annotated[Path, typer.Option("--ca", exists=True, dir_okay=False, help="The cluster's CA.")],
        token: Annotated[str | None, typer.Option("--token", help="A bearer token (cca user token).")] = None,
        cert: Annotated[Path | None, typer.Option("--cert", exists=True, dir_okay=False)] = None,
        key: Annotated[Path | None, typer.Option("--key", exists=True, dir_okay=False)] = None,
        use: Annotated[bool, typer.Option("--use/--no-use", help="Make it current.")] = True) -> None:
    """Add a context for a cluster: a bearer token, or a client certificate and key."""
    from ccattler.engine.clientconfig import Context, save_context, token_address

    if bool(token) == bool(cert or key) or bool(cert) != bool(key):
        raise typer.BadParameter("give --token, or --cert with --key")
    save_context(Context(name=name, server=server, token_server=token_address(server), ca=str(ca.resolve()),
                         cert=str(cert.resolve()) if cert else None, key=str(key.resolve()) if key else None,
                         token=token), make_current=use)
    typer.echo(f"context {name!r} added" + (" and made current" if use else ""))


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="context")
