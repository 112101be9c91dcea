"""`cca exec -t` sends its window size: at start, and again on every SIGWINCH, also after stdin
ended (the request stream stays open for resizes until the command exits); the client turns the
inputs into `ExecInput` messages."""

from __future__ import annotations

import os
import pty
import signal
import sys

import pytest

from ccattler.agent.runtime.terminal import set_window_size
from ccattler.cli.exec import _TerminalInputs, _window_size
from ccattler.engine.api.client_calls import STDIN_CLOSED, ClusterCalls


def test_window_size_and_sigwinch_become_resize_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w")
    try:
        set_window_size(master, 24, 80)
        monkeypatch.setattr(sys, "stdout", terminal)
        size = _window_size()
        assert size == (24, 80)
        inputs = _TerminalInputs(interactive=False)
        messages = iter(inputs)
        try:
            assert next(messages) is STDIN_CLOSED
            set_window_size(master, 40, 120)
            os.kill(os.getpid(), signal.SIGWINCH)  # what the kernel sends the foreground process
            assert next(messages) == (40, 120)
        finally:
            inputs.close()
        assert list(messages) == []
        assert signal.getsignal(signal.SIGWINCH) in (signal.SIG_DFL, None)  # restored
    finally:
        terminal.close()
        os.close(master)


def test_no_terminal_no_size(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    with open(tmp_path / "out", "w") as plain, open(os.devnull) as nothing:
        monkeypatch.setattr(sys, "stdout", plain)
        monkeypatch.setattr(sys, "stdin", nothing)
        assert _window_size() is None


class _Recorder(ClusterCalls):
    def stream(self, stub, method, request):  # noqa: ANN001, ANN201
        return method, list(request)


def test_the_client_turns_inputs_into_exec_messages() -> None:
    recorder = _Recorder()
    recorder.cluster = None
    method, messages = recorder.exec_session("web-a", ["sh"], [b"ls\n", STDIN_CLOSED, (40, 120)],
                                             tty=True, size=(24, 80))
    assert method == "Exec"
    first, data, closed, resized = messages
    assert (first.instance, list(first.command), first.tty) == ("web-a", ["sh"], True)
    assert (first.resize.rows, first.resize.cols) == (24, 80)
    assert data.stdin == b"ls\n" and closed.stdin_closed
    assert (resized.resize.rows, resized.resize.cols) == (40, 120)
