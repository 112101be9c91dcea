"""How `cca get`/`describe`/`apply`/`diff` show things: one column set per kind (uppercase headers,
stable order, `-o wide` adds columns), apply and diff reports, and describe's detail view."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import typer

from ccattler.cli._common import since, until
from ccattler.engine.facts import derived_instance, display_name

Column = tuple[str, Callable[[dict], Any]]


def _name(row: dict) -> str:
    return display_name(row["tenant"], row["name"]) if row.get("tenant") else row["name"]


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n // (1 << 20)}Mi"


def _pairs(mapping: dict | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((mapping or {}).items()))


def _short(text: str | None, width: int = 60) -> str | None:
    """A long reason cut to one table cell (`cca describe instance` has it whole)."""
    return text if not text or len(text) <= width else text[:width - 1] + "…"


def node_condition(row: dict) -> str:
    """`draining (waits: web floor 2)`: the condition with what a drain waits for."""
    condition = row["condition"]
    if row.get("waits"):
        return f"{condition} (waits: {'; '.join(row['waits'])})"
    if row.get("moving"):
        return f"{condition} (moving: {', '.join(row['moving'])})"
    return condition


def _tags(doc: dict | None) -> str:
    return _pairs((doc or {}).get("tags"))


COLUMNS: dict[str, tuple[list[Column], list[Column]]] = {
    "services": (
        [("name", _name), ("ready", lambda r: f"{r['ready']}/{r['desired']}"),
         ("image", lambda r: r["value"].get("image")), ("revision", lambda r: r["modified"]),
         ("desired", lambda r: f"{r['desired']}{' (autoscaler)' if r.get('autoscaled') else ''}"),
         ("current", lambda r: r["scheduled"])],
        [("scheduled", lambda r: r["scheduled"]), ("tags", lambda r: _tags(r["value"])),
         ("source", lambda r: r["value"].get("source"))],
    ),
    "instances": (
        [("name", _name), ("service", lambda r: r["service"]), ("node", lambda r: r["node"]),
         ("state", lambda r: r["state"]), ("ready", lambda r: "yes" if r["ready"] else "no"),
         ("health", lambda r: r.get("health")), ("restarts", lambda r: r["restarts"]),
         ("reason", lambda r: _short(r.get("reason")))],
        [("ip", lambda r: r["ip"]), ("image", lambda r: derived_instance.image(r["value"]))],
    ),
    "nodes": (
        [("name", _name), ("condition", node_condition), ("instances", lambda r: r["instances"]),
         ("cpu", lambda r: ((r["value"].get("capacity") or {}).get("cpu"))),
         ("memory", lambda r: _mib((r["value"].get("capacity") or {}).get("memory"))),
         ("zone", lambda r: r.get("zone"))],
        [("address", lambda r: r["value"].get("address")),
         ("dataplane", lambda r: r["value"].get("dataplane")),
         ("labels", lambda r: _pairs(r.get("labels"))),
         ("restrictions", lambda r: ",".join(r.get("restrictions") or ()))],
    ),
    "secrets": (
        [("name", _name), ("set", lambda r: "yes" if r["set"] else "no"),
         ("version", lambda r: (r["meta"] or {}).get("version")),
         ("updated", lambda r: since((r["meta"] or {}).get("updated")))],
        [("key id", lambda r: (r["meta"] or {}).get("key_id")),
         ("source", lambda r: (r["value"] or {}).get("source"))],
    ),
    "policies": (
        [("name", _name), ("type", lambda r: r["type"]),
         ("allow", lambda r: ",".join(r["value"].get("allow", [])) if r["type"] == "policy"
          else f"{r['value'].get('lines')} lines")],
        [],
    ),
    "tenant": (
        [("name", _name), ("declared", lambda r: "yes" if r["declared"] else "no"),
         ("instances", lambda r: f"{r['instances']}/{r['instance_quota']}"), ("quota", lambda r: r["quota"])],
        [],
    ),
    "events": (
        [("revision", lambda r: r["revision"]), ("type", lambda r: r["type"]), ("key", lambda r: r["key"]),
         ("reason", lambda r: r.get("reason"))],
        [],
    ),
}
GENERIC: tuple[list[Column], list[Column]] = (
    [("name", _name), ("source", lambda r: (r["value"] or {}).get("source")),
     ("revision", lambda r: r.get("created_revision"))],
    [("document", lambda r: json.dumps(r["value"], sort_keys=True)[:80])],
)


def apply_report(result: dict[str, Any]) -> None:
    """kubectl-style lines: `service web created`, `… configured`, `… pruned`, then a summary."""
    suffix = " (dry run)" if result.get("dry_run") else ""
    for verb, key in (("created", "added"), ("configured", "changed"), ("pruned", "removed")):
        for ref in result.get(key, []):
            typer.echo(f"{ref['display']} {verb}{suffix}")
    for warning in result.get("warnings", []):
        typer.echo(f"warning: {warning['policy']} [{warning['code']}]: {warning['message']}", err=True)
    typer.echo(f"{len(result.get('unchanged', []))} unchanged; revision {result.get('revision')}{suffix}")


def diff_report(diff: dict[str, Any]) -> None:
    """`+` added, `~` changed (field by field, old → new), `-` removed."""
    for change in diff.get("added", []):
        typer.secho(f"+ {change['ref']['display']}", fg="green")
    for change in diff.get("changed", []):
        typer.secho(f"~ {change['ref']['display']}", fg="yellow")
        old, new = change.get("old") or {}, change.get("new") or {}
        for field in sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k)):
            typer.echo(f"    {field}: {json.dumps(old.get(field))} → {json.dumps(new.get(field))}")
    for change in diff.get("removed", []):
        typer.secho(f"- {change['ref']['display']}", fg="red")
    for denial in diff.get("denials", []):
        typer.echo(f"would be denied by {denial['policy']} [{denial['code']}]: {denial['message']}", err=True)
    connections = diff.get("connections") or {}
    for entry in connections.get("opened", []):
        typer.secho(f"+ connection {_describe(entry)}", fg="green")
    for entry in connections.get("closed", []):
        typer.secho(f"- connection {_describe(entry)}", fg="red")
    if not (diff.get("added") or diff.get("changed") or diff.get("removed")):
        typer.echo("no changes")


def _describe(entry: dict[str, Any]) -> str:
    from ccattler.engine.netpolicy.effect import describe

    return describe(entry)


def plan_report(plan: dict[str, Any]) -> None:
    """The placement plan, drawn by the explain library's own report."""
    from rich.console import Console

    from ccattler.engine.placement.offline import Placed, PlanReport, Unplaced

    unplaced = tuple(Unplaced(u["instance"], u["service"], tuple(u["reasons"])) for u in plan["unplaced"])
    report = PlanReport(tuple(Placed(**p) for p in plan["placements"]), unplaced, plan["nodes"])
    typer.echo("")
    Console().print(report)


def _volumes(volumes: list[dict[str, Any]]) -> None:
    """An instance's volumes as its agent reports them: `default/data at /data: 3Mi of 64Mi (enforced)`."""
    if not volumes:
        return
    typer.echo("Volumes:")
    for v in volumes:
        size = f" of {_mib(v['size'])}" if v.get("size") is not None else ""
        how = "enforced" if v.get("enforced") else "not enforced" if size else "no size"
        over = "; OVER ITS SIZE" if v.get("size") is not None and (v.get("used") or 0) > v["size"] else ""
        typer.echo(f"  {v['name']} at {v['path']}: {_mib(v.get('used'))} used{size} ({how}{over})")


def _init(init: dict[str, Any] | None) -> None:
    """An instance's init steps as its agent reports them; a failed step with its output's tail."""
    if not init:
        return
    typer.echo(f"{'Init steps:':<18}{init['passed']}/{init['steps']} passed")
    failed = init.get("failed")
    if failed:
        code = "timed out" if failed["exit_code"] is None else f"exit code {failed['exit_code']}"
        typer.echo(f"  step {failed['step']} failed ({code}, {failed['attempts']} attempt(s)): "
                   f"{failed['exec']}")
        for line in (failed.get("output") or "").rstrip().splitlines()[-10:]:
            typer.echo(f"    | {line}")
        typer.echo("  (all its output: cca logs --init INSTANCE)")


def _identity(identity: dict[str, Any] | None) -> None:
    """An instance's workload identity as its agent reports it: SPIFFE id, expiry, next rotation."""
    if not identity:
        typer.echo(f"{'Identity:':<18}-")
        return
    import datetime as dt
    import time

    expires = dt.datetime.fromtimestamp(identity["expires"], dt.UTC)
    left = f"in {until(identity['expires'])}" if identity["expires"] > time.time() else "EXPIRED"
    typer.echo(f"{'Identity:':<18}{identity['spiffe_id']}")
    typer.echo(f"  expires {expires:%Y-%m-%d %H:%M:%S} UTC ({left}), rotates in "
               f"{until(identity.get('rotates'))}, serial {identity.get('serial', '-')}")


def describe(kind: str, row: dict[str, Any]) -> None:
    """The detail view: name, key, the joined fields, then the document as YAML."""
    import yaml

    typer.echo(f"{'Name:':<18}{_name(row)}")
    typer.echo(f"{'Kind:':<18}{kind.removesuffix('s')}")
    typer.echo(f"{'Key:':<18}{row['key']}")
    for field, value in row.items():
        if field == "volumes":
            _volumes(value)
        elif field == "init":
            _init(value)
        elif field == "identity":
            _identity(value)
        elif field == "labels":
            typer.echo(f"{'Labels:':<18}{_pairs(value) or '-'}")
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            typer.echo(f"{field.capitalize() + ':':<18}{', '.join(value) or '-'}")
        elif field not in ("key", "name", "tenant", "value") and not isinstance(value, dict):
            label = {"vip": "VIP:", "dns": "DNS:"}.get(field) or field.replace("_", " ").capitalize() + ":"
            typer.echo(f"{label:<18}{value if value is not None else '-'}")
    if row.get("value"):
        typer.echo("Document:")
        for line in yaml.safe_dump(row["value"], sort_keys=True).splitlines():
            typer.echo(f"  {line}")
