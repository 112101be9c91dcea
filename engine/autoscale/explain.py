"""The scaling section of `cca explain SERVICE`, read from the autoscaler's own document."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

_KEEP = ("desired", "recommended", "term", "terms", "reasons", "hold", "clamp", "floor", "min", "max",
         "at", "event", "vertical", "requests", "base", "pending", "vertical_reasons", "vertical_event")


def scaling_json(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: doc.get(k) for k in _KEEP if k in doc}


def _clock(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M:%S")


def vertical_lines(doc: Mapping[str, Any]) -> list[str]:
    """Per resource the P95 and the request it implies; the applied requests, what waits, and the
    last applied change (a new spec revision: `cca rollout history` shows it)."""
    out = []
    for resource, d in sorted((doc.get("vertical") or {}).items()):
        if d.get("recommendation") is None:
            out.append(f"    vertical {resource}: no usage samples (request {d.get('current')})")
        else:
            out.append(f"    vertical {resource}: P95 {d.get('p95')} → {d['recommendation']} "
                       f"(request {d.get('current')})")
    if doc.get("requests"):
        out.append(f"    requests set by the autoscaler: {doc['requests']} (spec: {doc.get('base')})")
    out.extend(f"    {r}" for r in doc.get("vertical_reasons") or [] if "waits until" in r)
    event = doc.get("vertical_event")
    if event:
        out.append(f"    last vertical change {_clock(event['at'])}: {event['from']} → {event['to']}")
    return out


def scaling_lines(doc: Mapping[str, Any]) -> list[str]:
    if "desired" not in doc:  # a vertical block only
        return ["  scaling: vertical only", *vertical_lines(doc)]
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
        out.append(f"    last change {_clock(event['at'])}: {event['from']} → {event['to']} "
                   f"({'; '.join(event['reasons'])})")
    return out + vertical_lines(doc)
