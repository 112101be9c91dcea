"""`cca exec -t` sends its window size: at start, and again on every SIGWINCH, also after stdin
ended (the request stream stays open for resizes until the command exits)."""

from __future__ import annotations

import os
import pty
import signal
import sys

import pytest

from ccattler.agent.runtime.terminal import set_window_size
from ccattler.cli.exec import _TerminalInputs, _window_size
from ccattler.engine.api.gen.ccattler.v1 import api_pb2


def test_window_size_and_sigwinch_become_resize_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w")
    try:
        set_window_size(master, 24, 80)
        monkeypatch.setattr(sys, "stdout", terminal)
        size = _window_size()
        assert size is not None and (size.rows, size.cols) == (24, 80)
        first = api_pb2.ExecInput(instance="web-a", command=["sh"], tty=True, resize=size)
        inputs = _TerminalInputs(first, interactive=False)
        messages = iter(inputs)
        try:
            assert next(messages) is first
            assert next(messages).stdin_closed
            set_window_size(master, 40, 120)
            os.kill(os.getpid(), signal.SIGWINCH)  # what the kernel sends the foreground process
            resized = next(messages)
            assert (resized.resize.rows, resized.resize.cols) == (40, 120)
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
