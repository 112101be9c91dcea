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
        info = api.secret_set(name, tenant, value)
    typer.echo(f"secret {info['name']} set (version {info['version']})")


@app.command("list")
@reports_errors
def list_(output: OutputOpt = "table",
          all_tenants: Annotated[bool, typer.Option("--all", "-A", help="Every tenant.")] = False,
          tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
          token: TokenOpt = None) -> None:
    """Secrets declared or set, with version and age (never values)."""
    with client(context, server, token) as api:
        items = api.secret_list(tenant, all_tenants)
    columns, wide = COLUMNS["secrets"]
    emit(items, columns, output, wide=wide)


@app.command("delete")
@reports_errors
def delete(name: Name, tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
           token: TokenOpt = None) -> None:
    """Delete a secret's value."""
    with client(context, server, token) as api:
        done = api.secret_delete(name, tenant)
    typer.echo(f"secret {done['deleted']} deleted")


@app.command("rotate")
@reports_errors
def rotate(name: Annotated[str | None, typer.Argument(help="Secret name, or tenant/name.")] = None,
           all_: Annotated[bool, typer.Option("--all", help="Every secret of the tenant.")] = False,
           all_tenants: Annotated[bool, typer.Option("-A", help="With --all: every tenant.")] = False,
           tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
           token: TokenOpt = None) -> None:
    """Re-encrypt under a fresh data key and the current master key (one secret, or --all)."""
    if bool(name) == all_:
        raise typer.BadParameter("give a secret NAME or --all")
    with client(context, server, token) as api:
        if all_:
            done = api.secret_rotate("**" if all_tenants else "*", tenant)
            typer.echo(f"{len(done['items'])} secret(s) rotated; master key {done['key_id']}")
        else:
            info = api.secret_rotate(name or "", tenant)
            typer.echo(f"secret {info['name']} rotated (version {info['version']})")


master = typer.Typer(help="The cluster's master keys (on the control-plane machine).", no_args_is_help=True)
app.add_typer(master, name="master-key")


def _master_key_file(context: str | None):
    from pathlib import Path

    from ccattler.engine.clientconfig import load_config
    from ccattler.engine.facts import CcaError
    from ccattler.engine.pki import ClusterFiles

    ctx = load_config().context(context)
    if not ctx.cluster:
        raise CcaError(f"context {ctx.name!r} has no cluster directory: run this where `cca init` ran")
    return ClusterFiles(Path(ctx.cluster)).master_key


@master.command("add")
@reports_errors
def master_add(context: ContextOpt = None) -> None:
    """Add a new current master key; older keys still unwrap until retired."""
    from ccattler.engine.secrets import add_master_key

    key_id = add_master_key(_master_key_file(context))
    typer.echo(f"master key {key_id} is now current (a running server picks it up)")
    typer.echo("next: cca secret rotate --all -A, then cca secret master-key retire", err=True)


@master.command("retire")
@reports_errors
def master_retire(context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Remove every master key but the current one, once no secret needs them."""
    from ccattler.engine.facts import CcaError
    from ccattler.engine.secrets import LocalKeyProvider, retire_master_keys

    path = _master_key_file(context)
    current = LocalKeyProvider.from_file(path).key_id
    with client(context, server, token) as api:
        items = api.secret_list(all_tenants=True)
    stale = sorted(f"{r['tenant']}/{r['name']}" for r in items if r["set"] and r["meta"]["key_id"] != current)
    if stale:
        raise CcaError(f"{len(stale)} secret(s) still use an older master key ({', '.join(stale[:5])}); "
                       "run `cca secret rotate --all -A` first")
    removed = retire_master_keys(path)
    typer.echo(f"retired {len(removed)} master key(s); current is {current}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="secret")
