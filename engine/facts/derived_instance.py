"""What a derived instance (`derived/instance/<tenant>/<service>/<instance>`, written by the instance
controller; docs/facts.md) holds: one accessor per field that the placement, rollout, disruption,
agent and API code read, with its default in one place instead of `.get("resources") or {}` at
every reader.

The instance controller writes every field, but documents from older versions, tests and
hand-built documents may lack one. Accessors return the document's own value as stored (no
coercion: a reader that needs a checked type, like `ordered_stop.ordinal_of`, still checks) or,
for `resources`, a shared read-only empty default: copy before changing. `doc` may be None (no
such instance): every field then has its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.engine.facts.frozen import FrozenDict
from ccattler.engine.facts.service_doc import Resources

Doc = Mapping[str, Any] | None

_NO_MAPPING: Mapping[str, Any] = FrozenDict()


def _field(doc: Doc, name: str) -> Any:
    return doc.get(name) if doc else None


def service(doc: Doc) -> str | None:
    """The service it belongs to ("tenant/name"), None when absent: views group instances by it."""
    return _field(doc, "service")


def ordinal(doc: Doc) -> int | None:
    """A stateful instance's ordinal, None for a stateless one (or when absent): what tells the two
    kinds apart, since a stateless suffix can be all digits."""
    return _field(doc, "ordinal")


def spec(doc: Doc) -> str | None:
    """The spec hash it was built from, None when absent: rollouts count instances per spec and
    agents build it from that spec's fields."""
    return _field(doc, "spec")


def image(doc: Doc) -> str | None:
    """The image the rollout chose for it, None when absent (the agent then uses the service's)."""
    return _field(doc, "image")


def resources(doc: Doc) -> Resources:
    """Its own request (a vertical change or rollback may differ from the service's), `{}` when
    none is recorded: readers then fall back to the service's or count 0."""
    return _field(doc, "resources") or _NO_MAPPING  # type: ignore[return-value]
