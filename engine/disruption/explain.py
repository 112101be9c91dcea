"""The rebalancing section of `cca explain SERVICE`: the moves of the last rebalancing cycle that
concern the service, with their gains, read from the disruption controller's `derived/rebalance`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any


def moves_of(doc: Any, service: str) -> dict[str, Any] | None:
    """`{"at", "moves": [{"instance", "from", "to", "gain"}]}` for `service` (`tenant/name`), or None
    when the last cycle moved nothing of it."""
    if not isinstance(doc, Mapping):
        return None
    moves = [{k: m.get(k) for k in ("instance", "from", "to", "gain")}
             for m in doc.get("moves") or () if isinstance(m, Mapping) and m.get("service") == service]
    return {"at": doc.get("at"), "moves": moves} if moves else None


def moves_lines(section: Mapping[str, Any]) -> list[str]:
    at = section.get("at")
    when = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at else "?"
    out = [f"  rebalancing: moved at {when} (the last cycle)"]
    out += [f"    {m['instance']}: {m['from']} → {m['to']} ({m['gain']})" for m in section["moves"]]
    return out
