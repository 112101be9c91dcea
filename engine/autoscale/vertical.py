"""Vertical recommendations: requests from the P95 of usage over a window, at 70 % utilisation.

Pure: the `scale.vertical` bounds, the current requests, usage samples `[at_ms, cpu_m, memory_bytes]`
(one per running instance: its own P95 over `WINDOW_MS`, kept by its agent, agent/telemetry.py, or
by replay), the time and the pending state in; new requests, new state and reasons out. A change
is applied only when it is ≥ 10 % and has been asked for continuously for the block's
`stabilization` (default 60 s up, 5 min down).
"""

from __future__ import annotations

import math

from ccattler.engine.facts.service_doc import vertical_wait_ms

WINDOW_MS = 300_000
TARGET = 0.70
IGNORE_BELOW = 0.10
_INDEX = {"cpu": 1, "memory": 2}


def p95(values: list) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def recommend(bounds: dict, requests: dict, samples, now_ms: int, state: dict | None,
              window_ms: int = WINDOW_MS):
    state = dict(state or {})
    out, reasons, detail = dict(requests), [], {}
    for resource, index in _INDEX.items():
        b = (bounds or {}).get(resource)
        if not b:
            continue
        values = [s[index] for s in samples if s[index] is not None and s[0] > now_ms - window_ms]
        current = requests.get(resource) or 0
        if not values:
            state.pop(resource, None)
            detail[resource] = {"current": current, "recommendation": None}
            continue
        target = math.ceil(p95(values) * 100 / (TARGET * 100))  # 700/0.7 is 1000.0000000000001
        target = max(b.get("min") or 0, min(target, b.get("max") or target))
        detail[resource] = {"current": current, "p95": p95(values), "recommendation": target}
        if current and abs(target - current) / current < IGNORE_BELOW:
            state.pop(resource, None)
            continue
        direction = "up" if target > current else "down"
        pending = state.get(resource)
        if not pending or pending["direction"] != direction:
            pending = state[resource] = {"direction": direction, "since": now_ms}
        wait = vertical_wait_ms(bounds, direction)
        if now_ms - pending["since"] >= wait or not current:
            out[resource] = target
            state.pop(resource, None)
            reasons.append(f"vertical {resource} {current} -> {target} (P95 {detail[resource]['p95']} "
                           f"at {int(TARGET * 100)} %)")
        else:
            reasons.append(f"vertical {resource} {direction} to {target} waits until "
                           f"{(pending['since'] + wait) // 1000}s")
    return out, state, reasons, detail
