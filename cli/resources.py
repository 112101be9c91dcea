"""The everyday commands against a live cluster: `apply`, `diff`, `delete`, `get`, `describe`,
`watch`, `events` and `status` (kubectl habits: `-o json|yaml|wide`, `--tag k=v`, `-f`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ccattler.cli import render
from ccattler.cli._common import (
    ContextOpt,
    OutputOpt,
    ServerOpt,
    TenantOpt,
    TokenOpt,
    client,
    emit,
    parse_tags,
    reports_errors,
)

Files = Annotated[list[Path], typer.Argument(help=".cca files or directories.")]
ValuesOpt = Annotated[list[Path] | None, typer.Option("--values", help="A .ccv values file (repeatable).")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="KEY=VALUE (repeatable).")]
SetEnvOpt = Annotated[list[str] | None, typer.Option("--set-from-env", help="KEY=ENV_VAR (repeatable).")]


def _sources(paths: list[Path], values: list[Path] | None, sets: list[str] | None,
             env_sets: list[str] | None) -> list:
    """Read and render the files here (templates and values are client-side); the server compiles."""
    from ccattler.dsl import load_sources

    loaded = load_sources(paths, values or (), sets=_pairs(sets, "--set"),
                          set_from_env=_pairs(env_sets, "--set-from-env"))
    return loaded


def _pairs(items: list[str] | None, option: str) -> dict[str, str]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{option} {item!r} must be KEY=VALUE")
        out[key] = value
    return out


@reports_errors
def apply(files: Files, values: ValuesOpt = None, set_: SetOpt = None, set_from_env: SetEnvOpt = None,
          dry_run: Annotated[bool, typer.Option("--dry-run", help="Admit but write nothing.")] = False,
          wait: Annotated[bool, typer.Option("--wait", help="Show instances converging.")] = False,
          timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits.")] = 300.0,
          tenant: TenantOpt = "", output: OutputOpt = "table",
          context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Apply files atomically: objects they no longer declare are pruned."""
    from ccattler.cli.wait import applied_services, wait_ready

    sources = _sources(files, values, set_, set_from_env)
    with client(context, server, token) as api:
        result = api.apply(sources, tenant=tenant, dry_run=dry_run)
        if output in ("json", "yaml"):
            emit([], [], output, raw=result)
        else:
            render.apply_report(result)
        if wait and not dry_run:
            wait_ready(api, applied_services(result), timeout)


@reports_errors
def diff(files: Files, values: ValuesOpt = None, set_: SetOpt = None, set_from_env: SetEnvOpt = None,
         plan: Annotated[bool, typer.Option("--plan", help="Also show where every instance would run "
                                                           "(placement against the live state).")] = False,
         tenant: TenantOpt = "", output: OutputOpt = "table",
         context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Show what applying the files would add (+), change (~) and remove (-)."""
    sources = _sources(files, values, set_, set_from_env)
    with client(context, server, token) as api:
        result = api.diff(sources, tenant=tenant)
        placement = api.plan(sources, tenant=tenant) if plan else None
    if output in ("json", "yaml"):
        emit([], [], output, raw=result | ({"plan": placement} if plan else {}))
        return
    render.diff_report(result)
    if placement is not None:
        render.plan_report(placement)


@reports_errors
def explain(target: Annotated[str, typer.Argument(help="Service or instance (tenant/name), or "
                                                    "`connection SRC DST:PORT/PROTO` / `service ID`.")],
            more: Annotated[list[str] | None, typer.Argument(help="The network explain's names.")] = None,
            dataplane: Annotated[str | None, typer.Option(
                "--dataplane", metavar="NODE", help="explain connection: also the entries NODE's kernel "
                "relies on (read back by its agent) and whether they agree.")] = None,
            output: OutputOpt = "table", tenant: TenantOpt = "", context: ContextOpt = None,
            server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Why a service runs where it does, why not elsewhere, and what blocks unplaced replicas;
    `explain connection` / `explain service`: who may reach whom, and the deciding rule."""

    if more:
        from ccattler.cli.netpolicy import KINDS, explain_network

        if target not in KINDS:
            raise typer.BadParameter(
                f"explain takes one name, or `connection SRC DST` / `service ID` (got {target!r})")
        explain_network(target, more, output, tenant, context, server, token, dataplane)
        return
    if dataplane:
        raise typer.BadParameter("--dataplane NODE goes with `explain connection`", param_hint="--dataplane")

    with client(context, server, token) as api:
        answer = api.explain(target, tenant)
    if output in ("json", "yaml"):
        emit([], [], output, raw=answer["explanation"])
    else:
        typer.echo("\n".join(answer["lines"]))


@reports_errors
def delete(kind: Annotated[str | None, typer.Argument(help="Kind (service, secret, network, …).")] = None,
           name: Annotated[str | None, typer.Argument(help="Name, or tenant/name.")] = None,
           file: Annotated[list[Path] | None, typer.Option("-f", "--file", help="Delete what these declare.")
                           ] = None,
           tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
           token: TokenOpt = None) -> None:
    """Delete one object (`delete KIND NAME`) or everything files declare (`delete -f FILE`)."""

    if file and (kind or name):
        raise typer.BadParameter("give KIND NAME or -f FILE, not both")
    if not file and not (kind and name):
        raise typer.BadParameter("give KIND NAME or -f FILE")
    with client(context, server, token) as api:
        if file:
            result = api.delete_files(_sources(file, None, None, None), tenant=tenant)
        else:
            result = api.delete(kind or "", name or "", tenant)
    for ref in result.get("removed", []):
        typer.echo(f"{ref['display']} deleted")
    if not result.get("removed"):
        typer.echo("nothing to delete")


@reports_errors
def get(kind: Annotated[str, typer.Argument(help="services, instances, nodes, secrets, policies, events, "
                                                 "or any kind.")],
        name: Annotated[str | None, typer.Argument(help="Only this object.")] = None,
        output: OutputOpt = "table",
        tag: Annotated[list[str] | None, typer.Option("--tag", help="KEY=VALUE selector (repeatable).")
                       ] = None,
        all_tenants: Annotated[bool, typer.Option("--all", "-A", help="Every tenant.")] = False,
        tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
        token: TokenOpt = None) -> None:
    """List objects of a kind as a table (or -o json|yaml|wide)."""
    with client(context, server, token) as api:
        result = api.get(kind, name or "", tenant=tenant, all_tenants=all_tenants, tags=parse_tags(tag))
    columns, wide = render.COLUMNS.get(result["kind"], render.GENERIC)
    emit(result["items"], columns, output, raw=result["items"], wide=wide)


@reports_errors
def describe(kind: Annotated[str, typer.Argument(help="Kind of the object.")],
             name: Annotated[str, typer.Argument(help="Name, or tenant/name.")],
             tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
             token: TokenOpt = None) -> None:
    """Show one object in detail, with its joined state (instances of a service, …)."""
    with client(context, server, token) as api:
        result = api.get(kind, name, tenant=tenant, all_tenants=not tenant and "/" in name)
        for row in result["items"]:
            render.describe(result["kind"], row)
            if result["kind"] == "services":
                instances = api.get("instances", tenant=row["tenant"])["items"]
                mine = [i for i in instances if i["service"] == f"{row['tenant']}/{row['name']}"]
                typer.echo("Instances:")
                render_rows = render.COLUMNS["instances"][0]
                emit(mine, render_rows, "table") if mine else typer.echo("  (none yet)")


@reports_errors
def watch(prefix: Annotated[str, typer.Argument(help="Key prefix, e.g. desired/service/ or derived/.")] = "",
          from_revision: Annotated[int, typer.Option("--from-revision", help="Resume after this revision.")
                                   ] = 0,
          output: Annotated[str, typer.Option("--output", "-o", help="table (revision, operation, key, "
                                              "document) or json (one object per line).")] = "table",
          context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Stream changes under a prefix with their documents (Ctrl-C stops; resume with --from-revision)."""
    import json

    if output not in ("table", "json"):
        raise typer.BadParameter(f"{output!r}: expected table or json", param_hint="--output")
    with client(context, server, token) as api:
        for event in api.watch(prefix, from_revision):
            if output == "json":
                typer.echo(json.dumps({"revision": event["revision"], "operation": event["kind"],
                                       "key": event["key"], "value": event["value"]}, sort_keys=True))
            else:
                doc = "" if event["value"] is None else "  " + json.dumps(event["value"], sort_keys=True)
                typer.echo(f"{event['revision']:>8}  {event['kind']:<6}  {event['key']}{doc}")
            sys.stdout.flush()


@reports_errors
def events(follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming.")] = False,
           output: OutputOpt = "table", context: ContextOpt = None, server: ServerOpt = None,
           token: TokenOpt = None) -> None:
    """Recent changes to the cluster state (desired, derived, observed)."""
    with client(context, server, token) as api:
        result = api.get("events")
        emit(result["items"], render.COLUMNS["events"][0], output, raw=result["items"])
        if follow:
            for event in api.watch_state(result["revision"]):  # what the caller may read
                typer.echo(f"{event['revision']:<9}{event['kind']:<7}{event['key']}")


@reports_errors
def status(output: OutputOpt = "table", context: ContextOpt = None, server: ServerOpt = None,
           token: TokenOpt = None) -> None:
    """The cluster at a glance: services, instances, nodes, leader, store."""
    with client(context, server, token) as api:
        info = api.status()
    if output in ("json", "yaml"):
        emit([], [], output, raw=info)
        return
    leader = info.get("leader")
    if isinstance(leader, dict):
        leader = leader.get("holder") or leader.get("identity") or leader
    inst, nodes = info["instances"], info["nodes"]
    typer.echo(f"server     {api.address} (revision {info['revision']}, store {info['store']})")
    typer.echo(f"leader     {leader or 'none'}")
    typer.echo(f"services   {info['services']}")
    typer.echo(f"instances  {inst['running']} running / {inst['placed']} placed / {inst['desired']} desired"
               + (f", {inst['failed']} failed" if inst["failed"] else "")
               + (f", {inst['stopping']} stopping" if inst.get("stopping") else ""))
    typer.echo(f"nodes      {nodes['registered']} registered, {nodes['down']} down, "
               f"{nodes['draining']} draining")
    typer.echo(f"secrets    {info['secrets']}    policies {info['policies']}")


def register(app: typer.Typer) -> None:
    app.command("apply")(apply)
    app.command("diff")(diff)
    app.command("explain")(explain)
    app.command("delete")(delete)
    app.command("get")(get)
    app.command("describe")(describe)
    app.command("watch")(watch)
    app.command("events")(events)
    app.command("status")(status)
