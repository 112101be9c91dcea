"""`cca token create`: a short-lived, single-use join token for `cca join` (stored hashed)."""

from __future__ import annotations

from typing import Annotated

import typer

from ccattler.cli._common import ContextOpt, ServerOpt, TokenOpt, client, reports_errors, until

app = typer.Typer(help="Join tokens for nodes.", no_args_is_help=True)


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
    from ccattler.engine.api.gen.ccattler.v1 import api_pb2

    with client(context, server, token) as api:
        made = api.unary(api.cluster, "TokenCreate", api_pb2.TokenRequest(ttl_seconds=parse_duration(ttl)))
        address, ca = api.context.server, api.context.ca
    typer.echo(made.token)
    typer.echo(f"# expires in {until(made.expires)}; on the node: cca join {address} {made.token} --ca ca.crt"
               f"  (copy {ca})", err=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="token")
