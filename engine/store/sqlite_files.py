"""The SQLite store's files are private: they hold token hashes, audit records and wrapped secrets.

`make_private(db)` runs before the first connection: the directory becomes 0700 (refused when it is
shared — sticky like /tmp, or someone else's), the database, its WAL, shared-memory and lock files
0600 (created so when missing: SQLite would create them with the umask's mode). `check_private`
says what is still readable by others, for start-up checks and tests.
"""

from __future__ import annotations

import os
import stat

from ccattler.engine.store.base import StoreUnavailable

SUFFIXES = ("", "-wal", "-shm", ".lock")
DIR_MODE, FILE_MODE = 0o700, 0o600


def make_private(db_path: str) -> None:
    directory = os.path.dirname(os.path.abspath(db_path))
    info = os.stat(directory)
    if stat.S_IMODE(info.st_mode) & 0o077:
        if info.st_mode & stat.S_ISVTX or info.st_uid != os.geteuid():
            raise StoreUnavailable(
                f"SQLite store {db_path}: directory {directory} is shared (mode "
                f"{stat.S_IMODE(info.st_mode):04o}); put the store in a directory of its own")
        os.chmod(directory, DIR_MODE)
    for suffix in SUFFIXES:
        path = db_path + suffix
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        except OSError as exc:
            raise StoreUnavailable(f"cannot open {path}: {exc.strerror}") from None
        try:
            os.fchmod(fd, FILE_MODE)
        finally:
            os.close(fd)
    problems = check_private(db_path)
    if problems:
        raise StoreUnavailable(f"SQLite store {db_path} is not private: " + "; ".join(problems))


def check_private(db_path: str) -> list[str]:
    """What is readable or writable by anyone but the owner (empty: all private)."""
    directory = os.path.dirname(os.path.abspath(db_path))
    found = [(directory, DIR_MODE)] + [(db_path + s, FILE_MODE) for s in SUFFIXES]
    problems = []
    for path, wanted in found:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            problems.append(f"{path} is {mode:04o}, wanted {wanted:04o}")
    return problems
