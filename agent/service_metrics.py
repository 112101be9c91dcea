"""This node's measurements of its services' load, published as `observed/metric/<t>/<svc>/<name>/
<node>` documents `{"value", "time", "source"}` (docs/autoscale.md: a source that is not an
instance is a part of the service's total, shared by its instances). Coalesced: a document is
rewritten when its value moves by 10 % (and at least 1) or when it is `refresh` seconds old, so a
steady node writes one document per service per `refresh` and the autoscaler, which counts a
sample older than three sample periods as missing, never sees a live one go stale."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.engine.facts.keys import METRICS


def moved(old: float, new: float) -> bool:
    return abs(new - old) >= max(1.0, 0.1 * abs(old))


class ServiceMetrics:
    def __init__(self, node: str, *, refresh: float = 30.0) -> None:
        self.node, self.refresh = node, refresh
        self._published: dict[str, dict[str, Any]] = {}

    def update(self, values: Mapping[tuple[str, str], float], now: float, source: str) -> None:
        """The new measurements: (service `tenant/name`, metric name) → value. A service or
        metric not measured any more loses its document."""
        published = {}
        for (service, metric), value in values.items():
            key = f"{METRICS}{service}/{metric}/{self.node}"
            old = self._published.get(key)
            if old is None or now - old["time"] >= self.refresh or moved(old["value"], value):
                published[key] = {"value": round(value, 3), "time": now, "source": source}
            else:
                published[key] = old
        self._published = published

    def documents(self) -> dict[str, dict[str, Any]]:
        """What to report now (the reporter sends only the documents that changed)."""
        return dict(self._published)
