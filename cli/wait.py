"""`cca apply --wait`: show the applied services' instances converging until every one is ready
(or the timeout passes, which fails naming the services still short)."""

from __future__ import annotations

import sys
import time
from typing import Any

from ccattler.engine.facts import CcaError, display_name

POLL_SECONDS = 0.5


def applied_services(result: dict[str, Any]) -> list[str]:
    """`tenant/name` of every service the apply created or changed."""
    refs = result.get("added", []) + result.get("changed", [])
    return sorted(f"{r['tenant']}/{r['name']}" for r in refs if r.get("kind") == "service")


def _progress(rows: dict[str, dict[str, Any]], services: list[str]) -> tuple[str, list[str]]:
    parts, short = [], []
    for full in services:
        row = rows.get(full)
        ready, desired = (row["ready"], row["desired"]) if row else (0, 0)
        parts.append(f"{display_name(*full.split('/', 1))} {ready}/{desired}")
        if row is None or ready < (desired or 0):
            short.append(full)
    return "  ".join(parts), short


def wait_ready(api: Any, services: list[str], timeout: float) -> None:
    """Poll until every service in `services` has all its instances ready; print progress."""
    if not services:
        return
    deadline, last = time.monotonic() + timeout, ""
    while True:
        rows = {f"{r['tenant']}/{r['name']}": r for r in api.get("services", all_tenants=True)["items"]}
        line, short = _progress(rows, services)
        if line != last:
            print(f"waiting: {line}", file=sys.stderr)
            last = line
        if not short:
            print("all instances ready", file=sys.stderr)
            return
        if time.monotonic() > deadline:
            names = ", ".join(display_name(*s.split("/", 1)) for s in short)
            raise CcaError(f"timed out after {timeout:g}s waiting for {names} to be ready ({line})")
        time.sleep(POLL_SECONDS)
