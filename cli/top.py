"""`cca top nodes|workloads [--tag k=v]` (usage the agents observe), `cca metric set SERVICE NAME
VALUE` (inject a metric, e.g. for autoscaling tests) and `cca node-inspect NODE [--dataplane]` (the
node runtime's own view and, with --dataplane, what its kernel enforces, asked through its agent's
tunnel: the CLI never touches the node)."""

from __future__ import annotations

import json
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
    fail,
    parse_tags,
    reports_errors,
)

top_app = typer.Typer(help="Resource usage of nodes and workloads.", no_args_is_help=True)
metric_app = typer.Typer(help="Inject metrics.", no_args_is_help=True)


def _mib(value: Any) -> str | None:
    return None if value is None else f"{int(value) / (1 << 20):.0f}Mi"


def _milli(value: Any) -> str | None:
    return None if value is None else f"{int(value)}m"


def _percent(used: Any, total: Any) -> str | None:
    return f"{100 * int(used or 0) / int(total):.0f}%" if total else None


def _top(kind: str, tags: dict[str, str], tenant: str, all_tenants: bool, context: str | None,
         server: str | None, token: str | None) -> list[dict[str, Any]]:

    with client(context, server, token) as api:
        return api.top(kind, tenant, all_tenants, tags)


@top_app.command("nodes")
@reports_errors
def top_nodes(output: OutputOpt = "table", context: ContextOpt = None, server: ServerOpt = None,
              token: TokenOpt = None) -> None:
    """Each node's capacity and what its running instances use."""
    rows = _top("nodes", {}, "", False, context, server, token)
    emit(rows, [("node", lambda r: r["name"]), ("cpu", lambda r: _milli(r["cpu"])),
                ("cpu%", lambda r: _percent(r["cpu"], r["cpu_capacity"])),
                ("memory", lambda r: _mib(r["memory"])),
                ("memory%", lambda r: _percent(r["memory"], r["memory_capacity"])),
                ("pids", lambda r: r["pids"]), ("instances", lambda r: r["instances"])], output)


@top_app.command("workloads")
@reports_errors
def top_workloads(output: OutputOpt = "table",
                  tag: Annotated[list[str] | None, typer.Option("--tag", help="KEY=VALUE (repeatable).")
                                 ] = None,
                  all_tenants: Annotated[bool, typer.Option("--all", "-A", help="Every tenant.")] = False,
                  tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
                  token: TokenOpt = None) -> None:
    """Each instance's cpu, memory and processes beside its request."""
    rows = _top("workloads", parse_tags(tag), tenant, all_tenants, context, server, token)
    emit(rows, [("instance", lambda r: r["name"]), ("service", lambda r: r["service"]),
                ("node", lambda r: r["node"]), ("state", lambda r: r["state"]),
                ("cpu", lambda r: _milli(r["cpu"])), ("cpu%", lambda r: _percent(r["cpu"], r["cpu_request"])),
                ("memory", lambda r: _mib(r["memory"])),
                ("memory%", lambda r: _percent(r["memory"], r["memory_request"])),
                ("pids", lambda r: r["pids"])], output)


@metric_app.command("set")
@reports_errors
def metric_set(service: Annotated[str, typer.Argument(help="Service (tenant/name for another tenant).")],
               name: Annotated[str, typer.Argument(help="Metric name, e.g. queue_depth.")],
               value: Annotated[float, typer.Argument(help="Its value.")],
               tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
               token: TokenOpt = None) -> None:
    """Set a service metric (observed/metric/<t>/<svc>/<name>/cli), as if a source reported it."""

    with client(context, server, token) as api:
        result = api.metric_set(service, name, value, tenant)
    typer.echo(f"{result['key']} = {value:g}")


@reports_errors
def node_inspect(node: Annotated[str, typer.Argument(help="Node name.")],
                 dataplane: Annotated[bool, typer.Option(
                     "--dataplane", help="Also what the node's kernel enforces: VIP → backends, "
                     "identity → addresses, policy tuples, hit counters (read back by its agent).")] = False,
                 output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table",
                 context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """What the node's runtime holds: containers, processes, usage, log sizes (asked live)."""

    with client(context, server, token) as api:
        report = api.node_inspect(node, dataplane=dataplane)
    if output == "json":
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    if output != "table":
        raise fail(f"unknown output format {output!r}; expected table or json", 2)
    condition = (report.get("condition") or {}).get("condition", "unknown")
    print(f"node {node}: {condition}, runtime {report['runtime'].get('runtime')}, "
          f"address {(report.get('observed') or {}).get('address', '-')}")
    emit(report["runtime"].get("containers", []),
         [("container", lambda c: c["name"]), ("state", lambda c: c["state"]), ("pid", lambda c: c["pid"]),
          ("memory", lambda c: _mib((c["usage"] or {}).get("memory"))),
          ("pids", lambda c: (c["usage"] or {}).get("pids")), ("log", lambda c: _mib(c["log_bytes"])),
          ("reason", lambda c: c["reason"])], "table")
    if dataplane:
        print_dataplane(report["dataplane"])


def _backends(entry: dict[str, Any]) -> str:
    return ", ".join(f"{b['ip']}:{b['port']}" for b in entry["backends"]) or "(none: refused)"


def print_dataplane(plane: dict[str, Any]) -> None:
    """The data plane part of `cca node-inspect --dataplane`, one table per kind of entry."""
    print(f"\ndata plane {plane.get('plane') or '-'} (asked: {plane.get('requested')})"
          + (f"; last apply failed: {plane['error']}" if plane.get("error") else ""))
    if plane.get("note"):
        print(plane["note"])
        return
    for title, rows, columns in (
            ("services", plane["services"], [("vip", lambda r: r["frontend"]), ("backends", _backends),
                                            ("hits", lambda r: r["hits"])]),
            ("external ports", plane["external"], [("port", lambda r: r["frontend"]),
                                                   ("backends", _backends), ("hits", lambda r: r["hits"])]),
            ("identities", plane["identities"], [("identity", lambda r: r["identity"]),
                                                 ("addresses", lambda r: ", ".join(r["addresses"]))]),
            ("policy (default deny)", [dict(t, identity=p["identity"]) for p in plane["policies"]
                                       for t in p["allowed"] or [{"source": None, "port": None,
                                                                  "protocol": None, "hits": None}]],
             [("destination", lambda r: r["identity"]), ("source", lambda r: r["source"] or "(none allowed)"),
              ("port", lambda r: "any" if r["port"] == 0 else r["port"]),
              ("protocol", lambda r: r["protocol"]),
              ("hits", lambda r: r["hits"])])):
        print(f"\n{title}:")
        if rows:
            emit(rows, columns, "table")
        else:
            print("  (none)")
    if plane["policies"]:
        print("\ndropped:")
        emit(plane["policies"], [("identity", lambda r: r["identity"]),
                                 ("local addresses", lambda r: ", ".join(r["local_addresses"])),
                                 ("dropped", lambda r: r["dropped"])], "table")
    if plane.get("refused") is not None:
        print(f"\nrefused (no ready backend): {plane['refused']}")
    print("\ncounters:")
    for what, meaning in plane["counters"].items():
        print(f"  {what}: {meaning}")


def register(app: typer.Typer) -> None:
    app.add_typer(top_app, name="top")
    app.add_typer(metric_app, name="metric")
    app.command("node-inspect")(node_inspect)
