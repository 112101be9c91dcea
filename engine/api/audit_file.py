"""The audit log file sink: every audit record write as one JSON line, rotated by size.

As the Kubernetes audit log backend (`--audit-log-path`, `--audit-log-maxsize`,
`--audit-log-maxbackup`): `path` grows to `max_bytes`, then becomes `path.1` (`path.1` becomes
`path.2`, …) and the oldest beyond `backups` is deleted. Each record write is one line — the intent
(`"decision": "requested"`) and then its outcome under the same `request_id` — so a shipper that
tails the file sees both. The store's record is the authoritative one: a line that cannot be
written is logged and counted (`failures`), and the call goes on.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("ccattler.api.audit")

DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_BACKUPS = 5
#: Seconds between two log lines about failed writes (a full disk would otherwise flood the log).
_COMPLAIN_EVERY = 60.0


class AuditFile:
    """Appends JSON lines to `path` (0600; a directory it creates is 0700), rotating at `max_bytes`.
    Opened at once: a path that cannot be written refuses to start."""

    def __init__(self, path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES, backups: int = DEFAULT_BACKUPS
                 ) -> None:
        if max_bytes < 1024:
            raise ValueError(f"audit log max size must be at least 1024 bytes; got {max_bytes}")
        if backups < 0:
            raise ValueError(f"audit log backups must be 0 or more; got {backups}")
        self.path, self.max_bytes, self.backups = Path(path), max_bytes, backups
        self.failures = 0
        self._lock = threading.Lock()
        self._complained = 0.0
        self._file: Any = None
        try:  # a path that cannot be written is a start-up error, not a silent loss later
            self._open()
        except OSError as exc:
            raise ValueError(f"cannot open the audit log file {self.path}: {exc.strerror or exc}") from None

    def write(self, record: dict[str, Any]) -> bool:
        """Append one record; False (logged, counted) when it could not be written."""
        line = (json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n").encode()
        with self._lock:
            try:
                file = self._open()
                if file.tell() and file.tell() + len(line) > self.max_bytes:
                    file = self._rotate()
                file.write(line)
                file.flush()
                return True
            except OSError as exc:
                self.failures += 1
                self._close()
                now = time.monotonic()
                if now - self._complained >= _COMPLAIN_EVERY:
                    self._complained = now
                    log.error("could not write audit log file %s: %s (the record is kept in the store; "
                              "%d lines lost so far)", self.path, exc, self.failures)
                return False

    def close(self) -> None:
        with self._lock:
            self._close()

    def _open(self) -> Any:
        if self._file is None:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._file = os.fdopen(fd, "ab")
        return self._file

    def _rotate(self) -> Any:
        self._close()
        if self.backups == 0:
            self.path.unlink(missing_ok=True)
        else:
            Path(f"{self.path}.{self.backups}").unlink(missing_ok=True)
            for n in range(self.backups - 1, 0, -1):
                older = Path(f"{self.path}.{n}")
                if older.exists():
                    older.rename(f"{self.path}.{n + 1}")
            self.path.rename(f"{self.path}.1")
        return self._open()

    def _close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
