"""`cca logs SERVICE|INSTANCE [-f] [--tail N] [--since 5m|TIME] [--tag k=v] [--init]`: container
output (or with --init, the init steps' output) from
every node running it, through the API server (each line prefixed with its instance)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ccattler.cli._common import (
    ContextOpt,
    ServerOpt,
    TenantOpt,
    TokenOpt,
    client,
    parse_tags,
    reports_errors,
)
from ccattler.cli.since import parse_since


class _Lines:
    """Prefixes whole lines with their instance; a partial line waits for its end."""

    def __init__(self, prefix: bool) -> None:
        self.prefix = prefix
        self.pending: dict[str, bytes] = {}

    def feed(self, instance: str, data: bytes) -> bytes:
        text = self.pending.pop(instance, b"") + data
        *lines, rest = text.split(b"\n")
        if rest:
            self.pending[instance] = rest
        label = f"[{instance.split('/', 1)[-1]}] ".encode() if self.prefix else b""
        return b"".join(label + line + b"\n" for line in lines)

    def flush(self) -> bytes:
        label = (lambda i: f"[{i.split('/', 1)[-1]}] ".encode()) if self.prefix else (lambda i: b"")
        return b"".join(label(i) + rest + b"\n" for i, rest in self.pending.items())


@reports_errors
def logs(target: Annotated[str, typer.Argument(help="Service or instance (tenant/name for another tenant).")
                           ] = "",
         follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming new output.")] = False,
         tail: Annotated[int, typer.Option("--tail", help="Lines from the end of each log (0: all).",
                                           min=0)] = 0,
         since: Annotated[str | None, typer.Option(
             "--since", metavar="DURATION|TIME", callback=lambda v: None if v is None else parse_since(v),
             help="Only output written in the last DURATION (30s, 5m, 2h) or since an RFC 3339 TIME "
                  "(2024-05-01T12:00:00Z); accurate to about a second. --tail applies to what remains.")
                           ] = None,
         tag: Annotated[list[str] | None, typer.Option("--tag", help="KEY=VALUE: every service tagged so "
                                                       "(repeatable).")] = None,
         init: Annotated[bool, typer.Option("--init", help="The output of the init steps instead (kept "
                                            "on the node after they ran).")] = False,
         tenant: TenantOpt = "", context: ContextOpt = None, server: ServerOpt = None,
         token: TokenOpt = None) -> None:
    """Print (or follow) the output of a service's instances, wherever they run."""

    tags = parse_tags(tag)
    if not target and not tags:
        raise typer.BadParameter("name a service or an instance, or give --tag KEY=VALUE")
    since_seconds, since_time = since or (0.0, 0.0)  # parsed by the option's callback
    lines = _Lines(prefix=True)
    out = sys.stdout.buffer
    try:
        with client(context, server, token) as api:
            for chunk in api.logs(target, tenant, follow=follow, tail=tail, tags=tags,
                                  since_seconds=since_seconds, since_time=since_time, init=init):
                out.write(lines.feed(chunk.instance, chunk.data))
                out.flush()
    except KeyboardInterrupt:
        pass
    out.write(lines.flush())
    out.flush()


def register(app: typer.Typer) -> None:
    app.command("logs")(logs)
