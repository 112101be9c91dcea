"""`cca explain connection SRC DST[:PORT[/PROTO]]` and `cca explain service ID`: network policy
verdicts from rules/netpolicy.lp on the live store (through the API, nothing written)."""

from __future__ import annotations

import typer

from ccattler.cli._common import client, emit

KINDS = ("connection", "service")


def explain_network(kind: str, args: list[str], output: str, tenant: str, context, server, token) -> None:

    wanted = 2 if kind == "connection" else 1
    if len(args) != wanted:
        usage = "SOURCE DESTINATION[:PORT[/tcp|udp]]" if kind == "connection" else "SERVICE"
        raise typer.BadParameter(f"explain {kind} takes {usage}")
    source, destination = (args[0], args[1]) if kind == "connection" else ("", args[0])
    with client(context, server, token) as api:
        answer = api.explain_network(kind, source, destination, tenant)
    if output in ("json", "yaml"):
        emit([], [], output, raw={k: v for k, v in answer.items() if k != "lines"})
    else:
        typer.echo("\n".join(answer["lines"]))
