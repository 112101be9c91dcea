"""Container log files: one file a container's stdout and stderr append to, rotated copy-truncate
style (`log` → `log.1`) once it passes `max_bytes`, so a chatty container cannot fill the disk.
A few lines written while rotating may be lost; the container never notices.

Each log has a time index beside it (`log.idx`, agent/runtime/logindex.py) that moves along with
it (`log.idx` → `log.1.idx`); `LOCK` keeps a checkpoint from landing between copy and truncate."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
#: Held while rotating and while appending a checkpoint to an index.
LOCK = threading.Lock()


def index_path(path: Path) -> Path:
    """The time index of log `path` (`log` → `log.idx`, `log.1` → `log.1.idx`)."""
    return path.with_name(path.name + ".idx")


def rotated_path(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def rotate(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bool:
    """Rotate `path` if it is larger than `max_bytes`, or its index larger than an eighth of that (a
    container that writes a little every second); returns True when it did."""
    index = index_path(path)
    try:
        if path.stat().st_size <= max_bytes and _size(index) <= max_bytes // 8:
            return False
    except FileNotFoundError:
        return False
    with LOCK:
        shutil.copyfile(path, rotated_path(path))
        os.truncate(path, 0)  # writers use O_APPEND: they continue at the new end
        try:
            os.replace(index, index_path(rotated_path(path)))
        except FileNotFoundError:  # never indexed (no agent running the indexer)
            index_path(rotated_path(path)).unlink(missing_ok=True)
        # The new file is empty now: a `since` after this point starts in it, not in `log.1`.
        append_checkpoint(index, time.time(), 0)
    return True


def append_checkpoint(index: Path, when: float, size: int) -> None:
    """Record that the log was `size` bytes long at unix time `when` (one text line, appended)."""
    with open(index, "a") as handle:
        handle.write(f"{when:.3f} {size}\n")


def read_checkpoints(index: Path) -> list[tuple[float, int]]:
    """The (time, size) checkpoints of an index, oldest first; a torn or foreign line is skipped."""
    try:
        text = index.read_text(errors="replace")
    except FileNotFoundError:
        return []
    found = []
    for line in text.splitlines():
        try:
            when, size = line.split()
            found.append((float(when), int(size)))
        except ValueError:
            continue
    return found


def read(path: Path, tail_bytes: int | None = None) -> bytes:
    """The log (the rotated part first), or its last `tail_bytes`."""
    data = b""
    for part in (rotated_path(path), path):
        try:
            data += part.read_bytes()
        except FileNotFoundError:
            continue
    return data[-tail_bytes:] if tail_bytes is not None else data


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
