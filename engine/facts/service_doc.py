"""What a service document (`desired/service/<tenant>/<name>`, docs/facts.md) holds: one accessor
per field that many parts read, each with its default for an absent or null field in one place,
instead of `.get("resources") or {}` at every reader.

The compiler writes every field with its default, but stored documents from older versions, tests
and hand-built documents may lack one. Accessors return the document's own value (read-only in
a runner snapshot, engine/facts/frozen.py) or a shared read-only empty default: copy before
changing. `doc` may be None (no such service): every field then has its default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ccattler.engine.facts.frozen import FrozenDict, FrozenList

Doc = Mapping[str, Any] | None

_NO_MAPPING: Mapping[str, Any] = FrozenDict()
_NO_LIST: Sequence[Any] = FrozenList()


class Resources(TypedDict, total=False):
    """What one instance requests: cpu in millicores, memory in bytes (absent: 0)."""

    cpu: int
    memory: int


def _mapping(doc: Doc, name: str) -> Mapping[str, Any]:
    return (doc.get(name) if doc else None) or _NO_MAPPING


def _list(doc: Doc, name: str) -> Sequence[Any]:
    return (doc.get(name) if doc else None) or _NO_LIST


def resources(doc: Doc) -> Resources:
    """The per-instance request, `{}` when none is declared (each resource then counts as 0)."""
    return _mapping(doc, "resources")  # type: ignore[return-value]


def scale(doc: Doc) -> Mapping[str, Any]:
    """The `scale` block (`horizontal`, `vertical`), `{}` without one."""
    return _mapping(doc, "scale")


def horizontal(doc: Doc) -> Mapping[str, Any]:
    """`scale.horizontal` (min, max, targets, events, schedules, stabilization), `{}` without one:
    the autoscaler sets the count when it is non-empty."""
    return scale(doc).get("horizontal") or _NO_MAPPING


def vertical(doc: Doc) -> Mapping[str, Any]:
    """`scale.vertical` (per-resource min/max bounds, stabilization), `{}` without one."""
    return scale(doc).get("vertical") or _NO_MAPPING


#: Milliseconds a recommendation must stand before it applies when `stabilization` omits one:
#: horizontal as the HPA (up at once, down after 5 minutes); vertical 60 s up, 5 minutes down.
HORIZONTAL_STABILIZATION: Mapping[str, int] = FrozenDict(scale_up=0, scale_down=300_000)
VERTICAL_STABILIZATION: Mapping[str, int] = FrozenDict(scale_up=60_000, scale_down=300_000)


def vertical_wait_ms(bounds: Mapping[str, Any] | None, direction: str) -> int:
    """How long a vertical change `up` or `down` must be asked for before it applies (a document
    stored before `vertical.stabilization` existed has the defaults)."""
    way = "scale_up" if direction == "up" else "scale_down"
    value = ((bounds or {}).get("stabilization") or {}).get(way)
    return value if isinstance(value, int) else VERTICAL_STABILIZATION[way]


def placement(doc: Doc) -> Mapping[str, Any]:
    """The `placement` block (require, prefer, accept, zone, zone_spread, …), `{}` without one."""
    return _mapping(doc, "placement")


def update(doc: Doc) -> Mapping[str, Any]:
    """The rolling-update block (max_unavailable, max_extra, deadline), `{}` without one."""
    return _mapping(doc, "update")


def disruption(doc: Doc) -> Mapping[str, Any]:
    """The disruption budget (min_available, max_unavailable), `{}` without one."""
    return _mapping(doc, "disruption")


def tags(doc: Doc) -> Mapping[str, str]:
    """The service's tags (`cca … --tag k=v` selects by them), `{}` without any."""
    return _mapping(doc, "tags")


def env(doc: Doc) -> Mapping[str, str]:
    """The declared environment (without `config.env`), `{}` without any."""
    return _mapping(doc, "env")


def config(doc: Doc) -> Mapping[str, Any]:
    """The `config` block (`env`, `files`), `{}` without one."""
    return _mapping(doc, "config")


def probes(doc: Doc) -> Mapping[str, Any]:
    """The probes by kind (`liveness`, `startup`, `readiness`: each a probe or null), `{}` without any."""
    return _mapping(doc, "probes")


def init(doc: Doc) -> Sequence[Mapping[str, Any]]:
    """The init steps (`exec`, `timeout` in ms or null, `retry`), `[]` without any."""
    return _list(doc, "init")


def expose(doc: Doc) -> Sequence[Mapping[str, Any]]:
    """The exposed ports (`port`, `protocol`, `external`), `[]` without any."""
    return _list(doc, "expose")


def secrets(doc: Doc) -> Sequence[Mapping[str, Any]]:
    """The secrets it mounts (`name` as "tenant/name", `mount`), `[]` without any."""
    return _list(doc, "secrets")


def connections(doc: Doc) -> Sequence[str]:
    """The connections it uses ("tenant/name"), `[]` without any."""
    return _list(doc, "connections")


def volumes(doc: Doc) -> Sequence[Mapping[str, Any]]:
    """The volumes it mounts (`name` as "tenant/name", `path`), `[]` without any."""
    return _list(doc, "volumes")
