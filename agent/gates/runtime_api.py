"""HAProxy's runtime API over its stats socket: one command per connection (non-interactive mode),
its answer checked for the errors HAProxy reports in text."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Protocol

from ccattler.engine.facts import CcaError

#: Answers HAProxy gives to a command it did not carry out (2.6's wording).
_FAILURES = ("no such", "unknown command", "permission denied", "require", "invalid", "unsupported",
             "can't", "cannot", "error")


class RuntimeApiError(CcaError):
    """HAProxy refused or could not be asked a runtime-API command."""


class RuntimeApi(Protocol):
    def command(self, line: str) -> str: ...


class SocketRuntimeApi:
    def __init__(self, path: Path, timeout: float = 2.0) -> None:
        self.path, self.timeout = path, timeout

    def command(self, line: str) -> str:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout)
                sock.connect(str(self.path))
                sock.sendall(line.encode() + b"\n")
                chunks = []
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
        except OSError as exc:
            raise RuntimeApiError(f"HAProxy runtime API at {self.path}: {exc}") from None
        return b"".join(chunks).decode(errors="replace")


def run_all(api: RuntimeApi, commands: list[str]) -> None:
    """Send `commands` in order; the first refusal raises (the caller reloads instead)."""
    for line in commands:
        answer = api.command(line)
        if any(word in answer.lower() for word in _FAILURES):
            raise RuntimeApiError(f"HAProxy refused {line!r}: {answer.strip()}")
