"""`cca rollout status|history|undo SERVICE`: a service's rolling update (engine/rollout).

`status` shows the rollout under way (or the last one): its state, the new and old instances, the
previous spec and what it waits for; `history` one line per revision, with "rolled back" and the
reason for each rollback; `undo` re-applies the previous spec (through admission, like any
change; the next `cca apply` of the service's file writes the file's spec again).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

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

rollout_app = typer.Typer(help="Rolling updates: status, history, undo.", no_args_is_help=True)
ServiceArg = Annotated[str, typer.Argument(help="Service (tenant/name for another tenant).")]


def register(app: typer.Typer) -> None:
    app.add_typer(rollout_app, name="rollout")


def _ask(action: str, service: str, tenant: str, context: str | None, server: str | None,
         token: str | None, dry_run: bool = False) -> Any:
    with client(context, server, token) as api:
        return api.rollout(action, service, tenant, dry_run)


def _when(timestamp: Any) -> str | None:
    if not isinstance(timestamp, (int, float)):
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(timestamp))


def status_lines(doc: dict[str, Any]) -> list[str]:
    images = doc.get("images") or {}
    spec = doc.get("spec")
    service = str(doc.get("service") or "")
    name = service.removeprefix("default/")
    lines = [f"service {name}: rollout {doc.get('revision')} {doc.get('state')}"
             f" (spec {spec}, image {images.get(spec)})"]
    counts = doc.get("counts") or {}
    progress = doc.get("progress")
    stepping = doc.get("state") in ("progressing", "waiting")
    if doc.get("state") != "complete" and counts:
        parts = [f"{n} of spec {s} (image {images.get(s)})" for s, n in sorted(counts.items())]
        lines.append("  wanted: " + ", ".join(parts))
    if stepping and isinstance(progress, list) and len(progress) == 2:
        lines.append(f"  new instances ready: {progress[0]}, old instances left: {progress[1]}")
    if doc.get("build") and doc.get("build") != spec:
        lines.append(f"  running: spec {doc['build']} (image {images.get(doc['build'])}) — the previous spec")
    previous = doc.get("previous_spec")
    if previous:
        command = f", command {previous['command']!r}" if previous.get("command") else ""
        lines.append(f"  previous spec: {previous['spec']} (image {previous.get('image')}{command})")
    else:
        lines.append("  previous spec: none")
    lines.append(f"  failures of new instances: {doc.get('failures', 0)} (rolls back at 3)")
    if doc.get("reason"):
        label = "rolled back" if doc.get("state") == "rolled back" else "why"
        lines.append(f"  {label}: {doc['reason']}")
    return lines


@rollout_app.command("status")
@reports_errors
def status(service: ServiceArg, output: OutputOpt = "table", tenant: TenantOpt = "",
           context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Show the service's rollout: state, progress, the previous spec and why it waits or rolled back."""
    doc = _ask("status", service, tenant, context, server, token)
    if output in ("json", "yaml"):
        emit([], [], output, raw=doc)
        return
    print("\n".join(status_lines(doc)))


@rollout_app.command("history")
@reports_errors
def history(service: ServiceArg, output: OutputOpt = "table", tenant: TenantOpt = "",
            context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """One line per revision of the service's spec: image, state ("rolled back" with the reason)."""
    doc = _ask("history", service, tenant, context, server, token)
    rows = list(doc.get("history") or [])
    emit(rows, [("revision", lambda r: r.get("revision")), ("image", lambda r: r.get("image")),
                ("spec", lambda r: r.get("spec")), ("state", lambda r: r.get("state")),
                ("started", lambda r: _when(r.get("started"))),
                ("cause", lambda r: r.get("cause") or "apply"),
                ("reason", lambda r: r.get("reason") or r.get("why"))],
         output, raw=rows)


@rollout_app.command("undo")
@reports_errors
def undo(service: ServiceArg,
         dry_run: Annotated[bool, typer.Option("--dry-run", help="Admit it, write nothing.")] = False,
         tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
         token: TokenOpt = None) -> None:
    """Re-apply the service's previous spec (rolled out like any change)."""
    result = _ask("undo", service, tenant, context, server, token, dry_run)
    changed = bool(result.get("changed"))
    verb = "would roll back to" if dry_run else "rolls back to"
    typer.echo(f"service {service} {verb} its previous spec" if changed
               else f"service {service} already runs its previous spec")
    if changed and not dry_run:
        typer.echo("(an override: the next `cca apply` of its file sets the file's spec again)")


