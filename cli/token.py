"""`cca token create|list|revoke`: short-lived, single-use join tokens for `cca join` (stored hashed)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from ccattler.cli._common import (
    ContextOpt,
    OutputOpt,
    ServerOpt,
    TokenOpt,
    client,
    emit,
    reports_errors,
    until,
)

app = typer.Typer(help="Join tokens for nodes (and revoking user tokens).", no_args_is_help=True)


def parse_duration(text: str) -> float:
    """`90s`, `15m`, `2h`, `7d` or plain seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a duration (e.g. 30m, 2h, 7d)") from None
    if value <= 0:
        raise typer.BadParameter(f"{text!r} must be positive")
    return value


@app.command("create")
@reports_errors
def create(ttl: Annotated[str, typer.Option("--ttl", help="Lifetime (e.g. 30m, 2h).")] = "1h",
           context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Make a join token; it is shown once and works once."""

    with client(context, server, token) as api:
        made = api.token_create(parse_duration(ttl))
        address, ca = api.context.server, api.context.ca
    typer.echo(made.token)
    typer.echo(f"# expires in {until(made.expires)}; on the node: cca join {address} {made.token} --ca ca.crt"
               f"  (copy {ca})", err=True)


@app.command("list")
@reports_errors
def list_(output: OutputOpt = "table", context: ContextOpt = None, server: ServerOpt = None,
          token: TokenOpt = None) -> None:
    """Join and user tokens (ids and expiry only; tokens are stored hashed)."""

    with client(context, server, token) as api:
        items = api.token_list()
    emit(items, [("id", lambda t: t["id"]), ("kind", lambda t: t["kind"]), ("user", lambda t: t["user"]),
                 ("expires", lambda t: until(t["expires"]) if t["expires"] > time.time() else "expired"),
                 ("created by", lambda t: t["created_by"])], output)


@app.command("revoke")
@reports_errors
def revoke(token_id: Annotated[str, typer.Argument(help="Token id (the part after `cca.`).")],
           context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Revoke a join or user token."""

    with client(context, server, token) as api:
        api.token_revoke(token_id)
    typer.echo(f"token {token_id} revoked")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="token")
