"""`cca audit`: who did what, when, and what was decided (security-relevant requests and denials)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer

from ccattler.cli._common import ContextOpt, OutputOpt, ServerOpt, TokenOpt, client, emit, reports_errors


@reports_errors
def audit(limit: Annotated[int, typer.Option("--limit", "-n", help="How many recent records.")] = 50,
          output: OutputOpt = "table", context: ContextOpt = None, server: ServerOpt = None,
          token: TokenOpt = None) -> None:
    """Show recent audit records, oldest first."""

    with client(context, server, token) as api:
        items = api.audit(limit)
    emit(items, [
        ("time", lambda r: dt.datetime.fromtimestamp(r["time"]).strftime("%Y-%m-%d %H:%M:%S")),
        ("request", lambda r: r["request_id"]), ("principal", lambda r: r["principal"]),
        ("verb", lambda r: r["verb"]), ("object", lambda r: r["object"]),
        ("decision", lambda r: r["decision"]),
    ], output, wide=[("reason", lambda r: " ".join(line.strip() for line in r["reason"].splitlines()))])


def register(app: typer.Typer) -> None:
    app.command("audit")(audit)
