"""`cca user create|list|delete|token`: users with a team and groups, and their bearer tokens."""

from __future__ import annotations

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
    since,
    until,
)
from ccattler.cli.token import parse_duration

app = typer.Typer(help="Users and their bearer tokens.", no_args_is_help=True)
Name = Annotated[str, typer.Argument(help="User name.")]


@app.command("create")
@reports_errors
def create(name: Name,
           team: Annotated[str | None, typer.Option("--team", help="The user's team (subject.team).")] = None,
           group: Annotated[list[str] | None, typer.Option("--group", help="An auth group (repeatable).")
                            ] = None,
           context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Create a user; grant it roles with `grant ROLE to user NAME` in a .cca file."""
    with client(context, server, token) as api:
        user = api.user_create(name, team or "", group or ())
    typer.echo(f"user {user['name']} created" + (f" (team {user['team']})" if user.get("team") else ""))


@app.command("list")
@reports_errors
def list_(output: OutputOpt = "table", context: ContextOpt = None, server: ServerOpt = None,
          token: TokenOpt = None) -> None:
    """Every user with team, groups and age."""

    with client(context, server, token) as api:
        items = api.user_list()
    emit(items, [("name", lambda u: u["name"]), ("team", lambda u: u.get("team")),
                 ("groups", lambda u: ",".join(u.get("groups", []))), ("age", lambda u: since(u["created"]))],
         output)


@app.command("delete")
@reports_errors
def delete(name: Name, context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Delete a user and revoke all its tokens."""
    with client(context, server, token) as api:
        api.user_delete(name)
    typer.echo(f"user {name} deleted")


@app.command("token")
@reports_errors
def user_token(name: Name,
               ttl: Annotated[str, typer.Option("--ttl", help="Lifetime (e.g. 12h, 30d).")] = "30d",
               context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Issue a bearer token for a user (shown once; use it with --token or CCA_TOKEN)."""
    with client(context, server, token) as api:
        made = api.user_token(name, parse_duration(ttl))
    typer.echo(made.token)
    typer.echo(f"# expires in {until(made.expires)}", err=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="user")
