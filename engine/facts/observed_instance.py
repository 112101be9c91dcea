"""What an observed instance (`observed/instance/<tenant>/<instance>`, written by the agent running
it; docs/facts.md) holds: one accessor per field many parts read, with its default in one place.

Accessors return the document's own value (read-only in a runner snapshot) or a shared read-only
empty default; `doc` may be None (no report yet): every field then has its default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ccattler.engine.facts.frozen import FrozenDict, FrozenList

Doc = Mapping[str, Any] | None


class Usage(TypedDict, total=False):
    """What a running instance uses: cpu in millicores (absent until the agent has two samples),
    memory in bytes, pids, and the P95 of cpu and memory over the vertical window."""

    cpu: int
    memory: int
    pids: int
    cpu_p95: int
    memory_p95: int


def usage(doc: Doc) -> Usage:
    """The last sampled usage, `{}` when not running or not sampled yet (the agent writes null)."""
    return (doc.get("usage") if doc else None) or _NO_MAPPING  # type: ignore[return-value]


def volumes(doc: Doc) -> Sequence[Mapping[str, Any]]:
    """The volumes it mounts as the agent sees them (`name`, `path`, `size`, `used`, `enforced`)."""
    return (doc.get("volumes") if doc else None) or _NO_LIST


_NO_MAPPING: Mapping[str, Any] = FrozenDict()
_NO_LIST: Sequence[Any] = FrozenList()
