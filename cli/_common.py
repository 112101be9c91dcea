"""What the client-side command groups share: connection options (`--context`, `--server`,
`--token`), opening a `Client`, error reporting, and rendering rows as tables, JSON or YAML."""

from __future__ import annotations

import functools
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

import typer

from ccattler.engine.facts import CcaError

ContextOpt = Annotated[str | None, typer.Option("--context", help="Context from $CCA_HOME/config.yaml.")]
ServerOpt = Annotated[str | None, typer.Option("--server", help="API server HOST:PORT (overrides context).")]
TokenOpt = Annotated[str | None, typer.Option("--token", envvar="CCA_TOKEN",
                                              help="Bearer token (instead of the context's certificate).")]
OutputOpt = Annotated[str, typer.Option("--output", "-o", help="table, wide, json or yaml.")]
TenantOpt = Annotated[str, typer.Option("--tenant", "-t", help="Tenant for bare names.")]


def client(context: str | None, server: str | None, token: str | None):
    """A connected `Client` for the chosen context."""
    from ccattler.engine.api.client import Client
    from ccattler.engine.clientconfig import resolve_context

    return Client(resolve_context(context, server, token))


#: Language diagnostics already say `file:line:col: error: …`; they are printed as they are.
_DIAGNOSTIC = re.compile(r"\S+:\d+(:\d+)?: (error|warning):")


def fail(message: str, code: int = 1) -> typer.Exit:
    print(message if _DIAGNOSTIC.match(message) else f"error: {message}", file=sys.stderr)
    return typer.Exit(code)


def reports_errors(fn: Callable) -> Callable:
    """Print `CcaError`s as `error: …` on stderr with exit code 1 (also under CliRunner)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CcaError as exc:
            raise fail(str(exc)) from None

    return wrapper


def age(seconds_ago: float | None) -> str:
    """Human age: 42s, 3m, 5h, 2d."""
    if seconds_ago is None:
        return "-"
    s = max(0, int(seconds_ago))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def since(timestamp: float | None) -> str:
    return "-" if not timestamp else age(time.time() - timestamp)


def until(timestamp: float | None) -> str:
    return "-" if not timestamp else age(timestamp - time.time())


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, Callable[[dict], Any]]],
         output: str, raw: Any = None, wide: Sequence[tuple[str, Callable[[dict], Any]]] = ()) -> None:
    """Print rows as a table (uppercase headers, stable column order), or `raw` as JSON/YAML."""
    if output == "json":
        print(json.dumps(raw if raw is not None else list(rows), indent=2, sort_keys=True, default=str))
        return
    if output == "yaml":
        import yaml

        print(yaml.safe_dump(raw if raw is not None else list(rows), sort_keys=True), end="")
        return
    if output not in ("table", "wide"):
        raise fail(f"unknown output format {output!r}; expected table, wide, json or yaml", 2)
    table(rows, list(columns) + (list(wide) if output == "wide" else []))


def table(rows: Iterable[dict[str, Any]], columns: Sequence[tuple[str, Callable[[dict], Any]]]) -> None:
    from rich.console import Console
    from rich.table import Table

    grid = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for name, _ in columns:
        grid.add_column(name.upper(), no_wrap=True)
    count = 0
    for row in rows:
        count += 1
        grid.add_row(*("-" if (v := get(row)) is None or v == "" else str(v) for _, get in columns))
    if not count:
        print("no resources found", file=sys.stderr)
        return
    # Pipes and files get full-width lines (no truncation), and no trailing padding.
    console = Console(width=None if sys.stdout.isatty() else 4096, soft_wrap=True)
    with console.capture() as captured:
        console.print(grid)
    print("\n".join(line.rstrip() for line in captured.get().splitlines()))


def parse_tags(tags: list[str] | None) -> dict[str, str]:
    out = {}
    for tag in tags or ():
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise fail(f"--tag {tag!r} must be KEY=VALUE", 2)
        out[key] = value
    return out
