"""`cca secret set|list|delete|rotate`: values are sent once over TLS, stored envelope-encrypted,
and never shown again (list shows metadata only)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ccattler.cli._common import (
    ContextOpt,
    OutputOpt,
    ServerOpt,
    TenantOpt,
    TokenOpt,
    client,
    emit,
    reports_errors,
)
from ccattler.cli.render import COLUMNS

app = typer.Typer(help="Secret values (envelope-encrypted; never shown back).", no_args_is_help=True)
Name = Annotated[str, typer.Argument(help="Secret name, or tenant/name.")]


def _request(name: str, tenant: str, value: bytes = b""):
    from ccattler.engine.api.gen.ccattler.v1 import api_pb2

    return api_pb2.SecretRequest(name=name, tenant=tenant, value=value)


@app.command("set")
@reports_errors
def set_(name: Name,
         from_file: Annotated[Path | None, typer.Option("--from-file", help="Read the value from a file "
                                                        "(default: stdin).", exists=True, dir_okay=False)
                              ] = None,
         tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
         token: TokenOpt = None) -> None:
    """Set a secret's value from a file or stdin (a new version with a fresh data key)."""
    value = from_file.read_bytes() if from_file else sys.stdin.buffer.read()
    if not value:
        raise typer.BadParameter("the value is empty (pipe it on stdin or use --from-file)")
    with client(context, server, token) as api:
        info = api.json("SecretSet", _request(name, tenant, value))
    typer.echo(f"secret {info['name']} set (version {info['version']})")


@app.command("list")
@reports_errors
def list_(output: OutputOpt = "table",
          all_tenants: Annotated[bool, typer.Option("--all", "-A", help="Every tenant.")] = False,
          tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
          token: TokenOpt = None) -> None:
    """Secrets declared or set, with version and age (never values)."""
    with client(context, server, token) as api:
        items = api.json("SecretList", _request("*" if all_tenants else "", tenant))["items"]
    columns, wide = COLUMNS["secrets"]
    emit(items, columns, output, wide=wide)


@app.command("delete")
@reports_errors
def delete(name: Name, tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
           token: TokenOpt = None) -> None:
    """Delete a secret's value."""
    with client(context, server, token) as api:
        done = api.json("SecretDelete", _request(name, tenant))
    typer.echo(f"secret {done['deleted']} deleted")


@app.command("rotate")
@reports_errors
def rotate(name: Name, tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
           token: TokenOpt = None) -> None:
    """Re-encrypt the current value under a fresh data key."""
    with client(context, server, token) as api:
        info = api.json("SecretRotate", _request(name, tenant))
    typer.echo(f"secret {info['name']} rotated (version {info['version']})")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="secret")
