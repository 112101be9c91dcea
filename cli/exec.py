"""`cca exec INSTANCE [-i] [-t] -- CMD…`: run a command in a running instance through the API server
(`runc exec` on its node); stdin with `-i`, a terminal with `-t`, and its exit code becomes ours."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Annotated

import typer

from ccattler.cli._common import ContextOpt, ServerOpt, TokenOpt, client, reports_errors


def _inputs(first, interactive: bool) -> Iterator:  # noqa: ANN001
    from ccattler.engine.api.gen.ccattler.v1 import api_pb2

    yield first
    if interactive:
        while data := os.read(sys.stdin.fileno(), 32 * 1024):
            yield api_pb2.ExecInput(stdin=data)
    yield api_pb2.ExecInput(stdin_closed=True)


@reports_errors
def exec_(instance: Annotated[str, typer.Argument(help="Instance (tenant/name for another tenant).")],
          command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
          interactive: Annotated[bool, typer.Option("--interactive", "-i", help="Send stdin.")] = False,
          tty: Annotated[bool, typer.Option("--tty", "-t", help="Give the command a terminal.")] = False,
          tenant: Annotated[str, typer.Option("--tenant", help="Tenant for a bare instance name.")] = "",
          context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Run a command inside a running instance; exits with the command's exit code."""
    from ccattler.engine.api.gen.ccattler.v1 import api_pb2

    if command[:1] == ["--"]:  # after INSTANCE nothing is an option: `--` is only a separator
        command = command[1:]
    if not command:
        raise typer.BadParameter("give the command after --")
    first = api_pb2.ExecInput(instance=instance, tenant=tenant, command=command, tty=tty)
    raw = tty and interactive and sys.stdin.isatty()
    saved = None
    if raw:  # keys go to the remote terminal as typed (Ctrl-C included)
        import termios
        import tty as terminal

        saved = termios.tcgetattr(sys.stdin.fileno())
        terminal.setraw(sys.stdin.fileno())
    code = None
    try:
        with client(context, server, token) as api:
            for out in api.stream(api.cluster, "Exec", _inputs(first, interactive)):
                if out.stdout:
                    sys.stdout.buffer.write(out.stdout)
                    sys.stdout.buffer.flush()
                if out.stderr:
                    sys.stderr.buffer.write(out.stderr)
                    sys.stderr.buffer.flush()
                if out.exited:
                    code = out.exit_code
    finally:
        if saved is not None:
            import termios

            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
    if code is None:
        raise typer.Exit(1)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("exec", context_settings={"allow_interspersed_args": False})(exec_)
