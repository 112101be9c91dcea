"""Container log files: one file a container's stdout and stderr append to, rotated copy-truncate
style (`log` → `log.1`) once it passes `max_bytes`, so a chatty container cannot fill the disk.
A few lines written while rotating may be lost; the container never notices."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

DEFAULT_MAX_BYTES = 10 * 1024 * 1024


def rotate(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bool:
    """Rotate `path` if it is larger than `max_bytes`; returns True when it did."""
    try:
        if path.stat().st_size <= max_bytes:
            return False
    except FileNotFoundError:
        return False
    shutil.copyfile(path, path.with_name(path.name + ".1"))
    os.truncate(path, 0)  # writers use O_APPEND: they continue at the new end
    return True


def read(path: Path, tail_bytes: int | None = None) -> bytes:
    """The log (the rotated part first), or its last `tail_bytes`."""
    data = b""
    for part in (path.with_name(path.name + ".1"), path):
        try:
            data += part.read_bytes()
        except FileNotFoundError:
            continue
    return data[-tail_bytes:] if tail_bytes is not None else data
