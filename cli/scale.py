"""`cca scale SERVICE N`: set a service's instances until the next apply of its file (which
replaces the override); refused for an autoscaled service (`scale { horizontal … }`) and for a
service group's member."""

from __future__ import annotations

from typing import Annotated

import typer

from ccattler.cli._common import ContextOpt, ServerOpt, TenantOpt, TokenOpt, client, reports_errors


@reports_errors
def scale(service: Annotated[str, typer.Argument(help="Service (tenant/name for another tenant).")],
          instances: Annotated[int, typer.Argument(help="How many instances it should run.", min=0)],
          dry_run: Annotated[bool, typer.Option("--dry-run", help="Admit it, write nothing.")] = False,
          tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
          token: TokenOpt = None) -> None:
    """Set a service's instance count until its file is applied again."""

    with client(context, server, token) as api:
        result = api.scale(service, instances, tenant, dry_run)
    changed = bool(result.get("changed"))
    verb = "would be scaled" if dry_run else "scaled"
    typer.echo(f"service {service} {verb} to {instances}" if changed
               else f"service {service} already runs {instances}")
    if changed and not dry_run:
        typer.echo("(an override: the next `cca apply` of its file sets the file's count again)")


def register(app: typer.Typer) -> None:
    app.command("scale")(scale)
