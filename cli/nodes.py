"""`cca drain NODE`, `cca disable-node NODE`, `cca enable-node NODE`: the user's intent for a node.

A drain moves every instance off within each service's disruption budget (replacement first),
then keeps the node unschedulable; disable makes it unschedulable without moving anything; enable
makes it schedulable again. `cca get nodes` / `cca describe node` show what a drain waits for."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from ccattler.cli._common import ContextOpt, ServerOpt, TokenOpt, client, reports_errors
from ccattler.cli.render import node_condition
from ccattler.engine.facts import CcaError

NodeArg = Annotated[str, typer.Argument(help="Node name (cca get nodes).")]


def _intent(node: str, intent: str, context: str | None, server: str | None, token: str | None,
            wait: bool = False, timeout: float = 300.0) -> None:

    with client(context, server, token) as api:
        api.node_intent(node, intent)
        done = {"drain": "draining", "disable": "disabled", "enable": "enabled"}[intent]
        typer.echo(f"node {node} {done}")
        if not wait:
            return
        deadline, last = time.monotonic() + timeout, None
        while True:
            row = api.get("nodes", node)["items"][0]
            shown = node_condition(row)
            if shown != last:
                typer.echo(f"  {shown}")
                last = shown
            if row["condition"] in ("drained", "down"):
                return
            if time.monotonic() > deadline:
                raise CcaError(f"timed out after {timeout:g}s waiting for node {node} to drain: {shown}")
            time.sleep(1.0)


@reports_errors
def drain(node: NodeArg,
          wait: Annotated[bool, typer.Option("--wait", help="Wait until the node is empty, showing what "
                                             "it waits for.")] = False,
          timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits.")] = 300.0,
          context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Move every instance off NODE within each service's budget, then keep it unschedulable."""
    _intent(node, "drain", context, server, token, wait, timeout)


@reports_errors
def disable_node(node: NodeArg, context: ContextOpt = None, server: ServerOpt = None,
                 token: TokenOpt = None) -> None:
    """Make NODE unschedulable (no new instances); what runs there stays."""
    _intent(node, "disable", context, server, token)  # nothing to wait for


@reports_errors
def enable_node(node: NodeArg, context: ContextOpt = None, server: ServerOpt = None,
                token: TokenOpt = None) -> None:
    """Make NODE schedulable again (ends a drain or a disable; rebalancing may move instances back)."""
    _intent(node, "enable", context, server, token)


def register(app: typer.Typer) -> None:
    app.command("drain")(drain)
    app.command("disable-node")(disable_node)
    app.command("enable-node")(enable_node)
