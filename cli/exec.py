"""`cca exec INSTANCE [-i] [-t] -- CMD…`: run a command in a running instance through the API server
(`runc exec` on its node); stdin with `-i`, a terminal with `-t` (at our window's size, following
it), and its exit code becomes ours."""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Annotated

import typer

from ccattler.cli._common import ContextOpt, ServerOpt, TokenOpt, client, reports_errors
from ccattler.engine.api.client_calls import STDIN_CLOSED


def _inputs(interactive: bool) -> Iterator:
    if interactive:
        while data := os.read(sys.stdin.fileno(), 32 * 1024):
            yield data
    yield STDIN_CLOSED


def _window_size() -> tuple[int, int] | None:
    """Our terminal's (rows, cols), or None when neither stdin nor stdout is a terminal."""
    for stream in (sys.stdout, sys.stdin):
        try:
            columns, rows = os.get_terminal_size(stream.fileno())
        except (OSError, ValueError):
            continue
        if rows and columns:
            return rows, columns
    return None


_END = object()


class _TerminalInputs:
    """With -t: stdin (read on a thread when -i) and window changes (SIGWINCH) merged into one
    stream of inputs, kept open after stdin ends so later resizes still reach the pty."""

    def __init__(self, interactive: bool) -> None:
        self._queue: queue.Queue = queue.Queue()
        if interactive:
            threading.Thread(target=self._read, daemon=True).start()
        else:
            self._queue.put(STDIN_CLOSED)
        self._hooked = True
        try:
            self._previous = signal.signal(signal.SIGWINCH, self._resized)
        except ValueError:  # not the main thread (embedded use): the size stays as it started
            self._hooked = False

    def __iter__(self) -> Iterator:
        while (message := self._queue.get()) is not _END:
            yield message

    def close(self) -> None:
        if self._hooked:
            signal.signal(signal.SIGWINCH, self._previous if self._previous is not None else signal.SIG_DFL)
        self._queue.put(_END)

    def _read(self) -> None:
        try:
            while data := os.read(sys.stdin.fileno(), 32 * 1024):
                self._queue.put(data)
        except OSError:
            pass
        self._queue.put(STDIN_CLOSED)

    def _resized(self, signum: int, frame: object) -> None:
        size = _window_size()
        if size is not None:
            self._queue.put(size)


@reports_errors
def exec_(instance: Annotated[str, typer.Argument(help="Instance (tenant/name for another tenant).")],
          command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
          interactive: Annotated[bool, typer.Option("--interactive", "-i", help="Send stdin.")] = False,
          tty: Annotated[bool, typer.Option("--tty", "-t", help="Give the command a terminal.")] = False,
          tenant: Annotated[str, typer.Option("--tenant", help="Tenant for a bare instance name.")] = "",
          context: ContextOpt = None, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Run a command inside a running instance; exits with the command's exit code."""
    if command[:1] == ["--"]:  # after INSTANCE nothing is an option: `--` is only a separator
        command = command[1:]
    if not command:
        raise typer.BadParameter("give the command after --")
    size = _window_size() if tty else None  # the remote terminal starts at our size, follows it
    raw = tty and interactive and sys.stdin.isatty()
    saved = None
    if raw:  # keys go to the remote terminal as typed (Ctrl-C included)
        import termios
        import tty as terminal

        saved = termios.tcgetattr(sys.stdin.fileno())
        terminal.setraw(sys.stdin.fileno())
    code = None
    inputs = _TerminalInputs(interactive) if tty else None
    messages = iter(inputs) if inputs is not None else _inputs(interactive)
    try:
        with client(context, server, token) as api:
            for out in api.exec_session(instance, command, messages, tenant=tenant, tty=tty, size=size):
                if out.stdout:
                    sys.stdout.buffer.write(out.stdout)
                    sys.stdout.buffer.flush()
                if out.stderr:
                    sys.stderr.buffer.write(out.stderr)
                    sys.stderr.buffer.flush()
                if out.exited:
                    code = out.exit_code
    finally:
        if inputs is not None:
            inputs.close()
        if saved is not None:
            import termios

            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
    if code is None:
        raise typer.Exit(1)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("exec", context_settings={"allow_interspersed_args": False})(exec_)
