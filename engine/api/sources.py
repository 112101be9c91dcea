"""Source files across the wire: the client renders templates and reads the files its sources name
with `from "path"` (`collect_files`); the server compiles with a reader that serves only those
(`wire_reader`), so it never touches its own filesystem on a client's behalf."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ccattler.dsl.sources import Reader, Source, SourceError, read_relative
from ccattler.engine.api.errors import BadRequest
from ccattler.engine.api.gen.ccattler.v1 import api_pb2


def collect_files(sources: Sequence[Source], tenant: str = "default") -> list[tuple[str, str, str]]:
    """(source name, relative path, text) of every file the sources read with `from`; found by a
    client-side compile whose reader records what it reads (errors are left for the server)."""
    if not any("from" in s.text for s in sources):
        return []
    from ccattler.dsl import compile_with_diagnostics

    read: dict[tuple[str, str], str] = {}

    def recording(source: Source, relpath: str) -> str:
        text = read_relative(source, relpath)
        read[(source.name, relpath)] = text
        return text

    compile_with_diagnostics(list(sources), tenant, recording)
    return [(name, path, text) for (name, path), text in sorted(read.items())]


def wire_sources(request: Any) -> tuple[list[Source], Reader]:
    """The sources of an Apply/Diff/Delete request and a reader over the files sent with them."""
    if not request.sources:
        raise BadRequest("no source files given")
    sources = [Source(name=s.path, text=s.text) for s in request.sources]
    files = {(f.source, f.path): f.text for f in getattr(request, "files", ())}

    def reader(source: Source, relpath: str) -> str:
        if (source.name, relpath) not in files:
            raise SourceError(f"{relpath!r} (named by {source.name}) could not be read by the client: "
                              "missing, unreadable or outside the file's directory")
        return files[(source.name, relpath)]

    return sources, reader


def to_wire(sources: Sequence[Source], tenant: str = "default") -> tuple[list[Any], list[Any]]:
    """Messages for the sources and the files they read."""
    return ([api_pb2.Source(path=s.name, text=s.text) for s in sources],
            [api_pb2.File(source=n, path=p, text=t) for n, p, t in collect_files(sources, tenant)])
