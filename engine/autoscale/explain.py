"""The scaling section of `cca explain SERVICE`, read from the autoscaler's own document."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

_KEEP = ("desired", "recommended", "term", "terms", "reasons", "hold", "clamp", "floor", "min", "max",
         "at", "event", "vertical")


def scaling_json(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: doc.get(k) for k in _KEEP if k in doc}


def scaling_lines(doc: Mapping[str, Any]) -> list[str]:
    out = [f"  scaling: {doc.get('desired')} instances (recommended {doc.get('recommended')}, "
           f"winning term: {doc.get('term')}, bounds [{doc.get('min')}, {doc.get('max')}])"]
    for t in doc.get("terms") or []:
        if t.get("recommendation") is None:
            out.append(f"    {t['term']}: cannot be read ({t.get('error')})")
            continue
        counts = ""
        if "ready" in t:
            counts = (f", {t['ready']} ready / {t['unready']} unready / {t['missing']} missing"
                      f" / {t['ignored']} ignored")
        sources = f" (samples from {', '.join(t['sources'])})" if t.get("sources") else ""
        out.append(f"    {t['term']}: observed {t.get('observed')} target {t.get('target')}{counts}"
                   f" → {t['recommendation']}{sources}")
    if doc.get("floor") is not None:
        out.append(f"    schedule floor: {doc['floor']}")
    if doc.get("clamp"):
        out.append(f"    clamp: {doc['clamp']}")
    out.extend(f"    {r}" for r in doc.get("reasons") or [] if r.startswith("held at"))
    event = doc.get("event")
    if event:
        when = dt.datetime.fromtimestamp(event["at"] / 1000, dt.UTC).strftime("%H:%M:%S")
        out.append(f"    last change {when}: {event['from']} → {event['to']} ({'; '.join(event['reasons'])})")
    return out
