"""When each part of a container log was written, for `cca logs --since`.

runc writes a container's stdio straight into its log file (no shim, no per-line timestamps), and
containers outlive the agent, so the agent cannot stamp lines. Instead `LogIndexer` looks at every
log once a second and, for each that grew, appends `(unix time, size)` to `<log>.idx`: everything
before that offset was written by then. Quiet containers cost a stat and no write; an index moves
with its log at rotation (agent/runtime/logfile.py). Reading since T starts at the last checkpoint
at or before T, at the next line start: accurate to about a second (the checkpoint interval), and
over-inclusive, never losing lines — output written while no agent was running counts as written
at the first checkpoint after it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ccattler.agent.runtime import logfile

log = logging.getLogger(__name__)


class LogIndexer:
    """Checkpoints the logs of `runtime` (its `log_paths()`) every `interval` seconds."""

    def __init__(self, runtime: Any, interval: float = 1.0, clock: Callable[[], float] = time.time) -> None:
        self.runtime, self.interval, self.clock = runtime, interval, clock
        self._indexed: dict[Path, tuple[int, int]] = {}  # log → (inode, size at its last checkpoint)

    def start(self, stop: threading.Event) -> threading.Thread | None:
        """Run in a thread until `stop`; None (no thread) for a runtime that keeps no log files."""
        if self.runtime.log_paths() is None:
            return None
        thread = threading.Thread(target=self.run, args=(stop,), name="cca-log-index", daemon=True)
        thread.start()
        return thread

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            try:
                self.checkpoint()
            except OSError as exc:  # a full disk must not end the indexer
                log.warning("log index: %s", exc)

    def checkpoint(self) -> int:
        """Append a checkpoint to the index of every log that grew; returns how many did."""
        now, grew, seen = self.clock(), 0, set()
        for path in self.runtime.log_paths() or ():
            seen.add(path)
            index = logfile.index_path(path)
            with logfile.LOCK:  # not between a rotation's copy and its truncate
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                inode, size = self._indexed.get(path) or (stat.st_ino, _last_size(index))
                if inode != stat.st_ino or stat.st_size < size or not index.exists():
                    size = 0  # a new container of that name, or rotated since the last look
                if stat.st_size > size:
                    logfile.append_checkpoint(index, now, stat.st_size)
                    grew += 1
                self._indexed[path] = (stat.st_ino, stat.st_size)
        for gone in set(self._indexed) - seen:
            del self._indexed[gone]
        return grew


def read_since(path: Path, since: float | None) -> tuple[bytes, int]:
    """What `log.1` and `log` hold from unix time `since` on (everything when None), starting at a
    line start, and the size of `log` read (where following continues)."""
    current = _read(path)
    rotated = logfile.rotated_path(path)
    if since is None:
        return _read(rotated) + current, len(current)
    start = _start(logfile.index_path(path), since, len(current))
    if start is not None:
        return _from_line(current, start), len(current)
    older = _read(rotated)  # T is before the current file's first checkpoint: look in `log.1`
    start = _start(logfile.index_path(rotated), since, len(older)) or 0
    return _from_line(older + current, start), len(current)


def _start(index: Path, since: float, size: int) -> int | None:
    """The offset of the last checkpoint at or before `since`, or None when there is none."""
    offset = None
    for when, at in logfile.read_checkpoints(index):
        if when > since:
            break
        offset = at
    return None if offset is None else min(offset, size)


def _from_line(data: bytes, start: int) -> bytes:
    """`data` from `start`, or from the next line when `start` falls inside a line (that line was
    begun before the checkpoint)."""
    if start <= 0 or data[start - 1:start] == b"\n":
        return data[start:]
    end = data.find(b"\n", start)
    return b"" if end < 0 else data[end + 1:]


def _last_size(index: Path) -> int:
    """The size at an existing index's last checkpoint (an agent restarting picks up where it was)."""
    try:
        with open(index, "rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - 64))
            last = handle.read().splitlines()[-1:]
        return int(last[0].split()[1]) if last else 0
    except (FileNotFoundError, ValueError, IndexError):
        return 0


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
