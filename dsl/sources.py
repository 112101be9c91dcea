"""What the compiler reads: `Source` (a named text with its directory) and the `from "file"` reader.

`read_relative` is the default reader: it resolves a path against the source's directory and
refuses anything outside that directory tree (symlinks included). The API server passes its own
reader over the files a client sent.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ccattler.engine.facts import CcaError


@dataclass(frozen=True, slots=True)
class Source:
    """One .cca text: `name` as the user gave it (shown in errors), `base_dir` for `from` paths."""

    name: str
    text: str
    base_dir: Path | None = None


#: reader(source, relpath) -> the file's text; raises OSError or CcaError when it cannot.
Reader = Callable[[Source, str], str]

#: Files read through `from` larger than this are refused (a document must fit in the store).
MAX_FROM_BYTES = 512 * 1024


class SourceError(CcaError):
    """A source or a file it names cannot be read."""


def escapes(relpath: str) -> bool:
    """True when `relpath` is absolute or climbs out of its directory (`../x`, `a/../../x`)."""
    if not relpath or relpath.startswith(("/", "\\")) or "\\" in relpath:
        return True
    normal = posixpath.normpath(relpath)
    return normal == ".." or normal.startswith("../")


def read_relative(source: Source, relpath: str) -> str:
    """Read `relpath` below `source.base_dir`, refusing paths that leave that directory tree."""
    if source.base_dir is None:
        raise SourceError(f"{source.name} has no directory to read {relpath!r} from")
    if escapes(relpath):
        raise SourceError(f"{relpath!r} is outside the directory of {source.name}")
    root = source.base_dir.resolve()
    path = (root / relpath).resolve()
    if not path.is_relative_to(root):
        raise SourceError(f"{relpath!r} leads outside the directory of {source.name} (symlink?)")
    if not path.is_file():
        raise SourceError(f"{relpath!r} not found (looked at {path})")
    if path.stat().st_size > MAX_FROM_BYTES:
        raise SourceError(f"{relpath!r} is larger than {MAX_FROM_BYTES // 1024} KiB")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SourceError(f"{relpath!r} is not UTF-8 text") from None
