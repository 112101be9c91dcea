"""The `cca` command: joins one typer app per command group (cli/<group>.py) into one.

Each group module exposes `register(app)`; add a module to `COMMAND_MODULES` to add commands.
Errors derived from `CcaError` print as one message on stderr with exit code 1, never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import version
from typing import Annotated

import typer

from ccattler.engine.facts import CcaError

#: Command group modules under ccattler.cli, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "image", "init", "server", "runner", "resources", "secret", "token", "user", "policy", "audit",
    "lang", "plan", "logic", "context", "login", "agent", "up", "logs", "exec", "scale", "benchmark",
    "top", "autoscale", "nodes", "rollout",
)

app = typer.Typer(
    name="cca",
    help="CCattler: a container orchestrator whose state is facts and whose controllers are logic.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cca {version('ccattler')}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """CCattler: a container orchestrator whose state is facts and whose controllers are logic."""


for _module in COMMAND_MODULES:
    importlib.import_module(f"ccattler.cli.{_module}").register(app)


def main() -> None:
    try:
        app()
    except CcaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
