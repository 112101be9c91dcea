"""`cca login --server S [--token T]`, `cca logout`, `cca whoami`: bearer-token credentials kept in
a context of $CCA_HOME/config.yaml (written 0600), checked against the server before they are kept."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ccattler.cli._common import ContextOpt, OutputOpt, ServerOpt, TokenOpt, client, reports_errors
from ccattler.engine.facts import CcaError


def _context_name(server: str) -> str:
    return "cca-" + server.replace(":", "-").replace("[", "").replace("]", "")


@reports_errors
def login(server: Annotated[str, typer.Option("--server", help="The API server's HOST:PORT (mutual-TLS "
                                                               "port; tokens go to the next one).")],
          token: Annotated[str | None, typer.Option("--token", help="A bearer token (`cca user token`); "
                                                    "read from the terminal or stdin when not given.")
                           ] = None,
          ca: Annotated[Path | None, typer.Option("--ca", exists=True, dir_okay=False,
                                                  help="The cluster's CA certificate (default: the CA of "
                                                       "a context for this server).")] = None,
          context: Annotated[str | None, typer.Option("--context", help="Context to keep it in (default: "
                                                      "the one for this server, else cca-HOST-PORT).")
                             ] = None) -> None:
    """Log in to a cluster with a bearer token; the context becomes current."""
    from dataclasses import replace

    from ccattler.engine.api.client import Client
    from ccattler.engine.clientconfig import Context, load_config, save_context, token_address

    config = load_config()
    same = next((c for c in config.contexts.values() if c.server == server), None)
    name = context or (same.name if same else _context_name(server))
    base = config.contexts.get(name) or same
    if ca is None and base is None:
        raise CcaError(f"no context for {server} yet: give --ca FILE (the cluster's CA certificate, "
                       "e.g. ca.pem from the cluster's admin)")
    if token is None:
        token = typer.prompt("token", hide_input=True) if sys.stdin.isatty() else sys.stdin.readline()
        token = token.strip()
    if not token:
        raise CcaError("no token given")
    ctx = Context(name=name, server=server, token_server=token_address(server),
                  ca=str(ca.resolve()) if ca else base.ca, token=token)  # type: ignore[union-attr]
    if base is not None and base.name == name:  # keep what else the context holds (e.g. `cluster`)
        ctx = replace(base, server=ctx.server, token_server=ctx.token_server, ca=ctx.ca, token=token,
                      cert=None, key=None)
    with Client(ctx) as api:
        me = api.who_am_i()
    path = save_context(ctx, make_current=True)
    typer.echo(f"logged in to {server} as {me['name']} ({me['kind']}); context {name!r} in {path}")


@reports_errors
def logout(context: ContextOpt = None) -> None:
    """Forget the token of a context (the current one by default)."""
    from dataclasses import replace

    from ccattler.engine.clientconfig import load_config, save_context

    ctx = load_config().context(context)
    if not ctx.token:
        how = f"a client certificate ({ctx.cert})" if ctx.cert else "no credentials"
        raise CcaError(f"context {ctx.name!r} holds no token to log out of: it authenticates with {how}")
    save_context(replace(ctx, token=None), make_current=False)
    typer.echo(f"logged out of {ctx.server} (context {ctx.name!r} keeps the server and CA)")


@reports_errors
def whoami(output: OutputOpt = "table", context: ContextOpt = None, server: ServerOpt = None,
           token: TokenOpt = None) -> None:
    """Who the server takes you for, through which context."""
    import json

    from ccattler.engine.clientconfig import resolve_context

    ctx = resolve_context(context, server, token)
    with client(context, server, token) as api:
        me = api.who_am_i()
    me |= {"context": ctx.name, "server": ctx.server,
           "auth": "token" if ctx.token else f"certificate {ctx.cert}" if ctx.cert else "none"}
    if output == "json":
        typer.echo(json.dumps(me, indent=2, sort_keys=True))
        return
    for field in ("name", "kind", "team", "groups", "context", "server", "auth"):
        value = me.get(field)
        typer.echo(f"{field + ':':<9}{', '.join(value) if isinstance(value, list) else value or '-'}")


def register(app: typer.Typer) -> None:
    app.command("login")(login)
    app.command("logout")(logout)
    app.command("whoami")(whoami)
