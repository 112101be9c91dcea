"""This node's measurements of its services' load, published as `observed/metric/<t>/<svc>/<name>/
<node>` documents `{"value", "time", "source"}` (docs/autoscale.md: a source that is not an
instance is a part of the service's total, shared by its instances). Coalesced: a document is
rewritten when its value moves by 10 % (and at least 1) or when it is `refresh` seconds old, so a
steady node writes one document per service per `refresh` and the autoscaler, which counts a
sample older than three sample periods as missing, never sees a live one go stale."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.agent.dataplane.state import keys_under
from ccattler.engine.facts.keys import METRICS, VIPS


def moved(old: float, new: float) -> bool:
    return abs(new - old) >= max(1.0, 0.1 * abs(old))


class ServiceMetrics:
    def __init__(self, node: str, *, refresh: float = 30.0) -> None:
        self.node, self.refresh = node, refresh
        self._published: dict[str, dict[str, Any]] = {}

    def update(self, values: Mapping[tuple[str, str], tuple[float, str]], now: float,
               unread: frozenset[str] = frozenset()) -> None:
        """The new measurements: (service `tenant/name`, metric name) → (value, source). A
        service or metric not measured any more loses its document, unless its source is one
        that could not be read this time (`unread`): its last sample stays and goes stale."""
        published = {k: doc for k, doc in self._published.items() if doc["source"] in unread}
        for (service, metric), (value, source) in values.items():
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


def counted_vips(facts: Mapping[str, Any], skip: set[str]) -> dict[str, str]:
    """VIP → service, for the VIPs the network controller marked `count` (engine/controllers/
    vip.py: the service scales on requests/s) whose service is not in `skip` (a gate counts its
    requests)."""
    counted = {}
    for key in keys_under(facts, VIPS):
        doc, service = facts.get(key), key[len(VIPS):]
        if isinstance(doc, Mapping) and doc.get("count") and service not in skip:
            counted[doc.get("ip")] = service
    return counted


def connection_totals(counted: Mapping[str, str], counters: Mapping[str, Any]) -> dict[str, int]:
    """Service → new connections from this node to its VIP (its ports summed), from a data plane's
    `counters()["services"]` ("ip:port/proto" → count)."""
    totals: dict[str, int] = dict.fromkeys(counted.values(), 0)
    for frontend, count in counters.items():
        service = counted.get(frontend.partition(":")[0])
        if service is not None and isinstance(count, int):
            totals[service] += count
    return totals


class Rates:
    """Per counter, its rate between the last two samples (none until a counter has two). A
    counter that went down was reset (HAProxy's reload starts a new worker at zero; a data plane
    re-made its table): its count starts again rather than giving a negative rate."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}

    def sample(self, totals: Mapping[str, int], now: float) -> dict[str, float]:
        rates = {}
        for name, total in totals.items():
            previous = self._last.get(name)
            if previous is not None and now > previous[0] and total >= previous[1]:
                rates[name] = (total - previous[1]) / (now - previous[0])
            self._last[name] = (now, total)
        for gone in set(self._last) - set(totals):
            del self._last[gone]
        return rates


class Recent:
    """Keeps a service's rate while this node has seen load for it within `quiet` seconds: a node
    none of whose clients use a service writes nothing for it (at 1,000 nodes a zero from each
    would be most of the store's writes), and a service whose load stopped still gets zeros for
    a while, so it can scale down (its scale-down window, 5 minutes by default, is shorter)."""

    def __init__(self, quiet: float = 600.0) -> None:
        self.quiet = quiet
        self._active: dict[str, float] = {}

    def keep(self, rates: Mapping[str, float], now: float) -> dict[str, float]:
        for service, rate in rates.items():
            if rate > 0:
                self._active[service] = now
        self._active = {s: at for s, at in self._active.items() if s in rates and now - at < self.quiet}
        return {s: rate for s, rate in rates.items() if s in self._active}


class ConnectionLoad:
    """Connections/s per counted service from this node's data plane, reported while recent
    (`Recent`)."""

    def __init__(self, quiet: float = 600.0) -> None:
        self._rates = Rates()
        self._recent = Recent(quiet)

    def sample(self, totals: Mapping[str, int], now: float) -> dict[str, float]:
        return self._recent.keep(self._rates.sample(totals, now), now)
