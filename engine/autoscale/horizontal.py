"""One horizontal decision: every term's recommendation, the max, stabilization, the clamp.

Pure: the spec's `scale.horizontal`, the current (desired) count, the instances, the event values,
the time (ms since the epoch, from the snapshot), the recommendation history and the cluster's time
zone in; a `Decision` (with the new history and every reason) out. As the HPA: a term that cannot be
read blocks a scale-down; no readable term at all means no change.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from ccattler.engine.autoscale import calc

_PERCENT = {"cpu", "memory"}
_DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


@dataclass
class Decision:
    current: int
    recommended: int            # max of the terms, before stabilization and the clamp
    desired: int                # after them
    term: str                   # the winning term ("none" when nothing was readable)
    terms: list = field(default_factory=list)    # per-term explanation dicts
    reasons: list = field(default_factory=list)
    history: list = field(default_factory=list)  # runs [[first_ms, last_ms, recommendation], …]
    hold: dict | None = None    # the stabilization window holding the count, when it does
    clamp: str | None = None
    floor: int | None = None    # the active schedule's minimum


def schedule_floor(schedules, now_ms: int, tz: str = "UTC") -> tuple[int | None, dict | None]:
    """The highest `minimum` among the schedules whose window holds `now` (in `tz`)."""
    local = dt.datetime.fromtimestamp(now_ms / 1000, ZoneInfo(tz))
    day, hm = _DAY_NAMES[local.weekday()], local.strftime("%H:%M")
    best, which = None, None
    for s in schedules or []:
        start, end = s["start"], s["end"]
        inside = start <= hm < end if start <= end else (hm >= start or hm < end)
        if inside and day in (s.get("days") or _DAY_NAMES) and (best is None or s["minimum"] > best):
            best, which = s["minimum"], s
    return best, which


def _metric_term(t: dict, current: int, instances) -> dict:
    metric, target = t["metric"], t["value"]
    out = {"term": f"target {metric}", "metric": metric, "target": target}
    try:
        if metric in _PERCENT:
            r = calc.resource_replicas(current, int(target), metric, instances)
        else:
            r = calc.per_instance_replicas(current, target, metric, instances)
    except calc.NoMetrics as exc:
        out.update(recommendation=None, error=str(exc))
        return out
    out.update(observed=r.observed, ready=r.ready, unready=r.unready, missing=r.missing,
               ignored=r.ignored, recommendation=r.replicas)
    return out


def _event_term(e: dict, current: int, events: dict) -> dict:
    out = {"term": f"event {e['source']}", "metric": e["source"], "target": e["per_instance"]}
    value = events.get(e["source"])
    if value is None:
        out.update(recommendation=None, error=f"no value for event {e['source']}")
        return out
    out.update(observed=value, recommendation=calc.event_replicas(current, value, e["per_instance"]))
    return out


def stabilize(recommendation: int, current: int, now_ms: int, history, up_ms: int, down_ms: int):
    """stabilizeRecommendationWithBehaviors: up to the lowest recommendation in the up window,
    down to the highest in the down window. `history` holds runs `[first_at, last_at, count]` (a
    recommendation repeated tick after tick is one run, so the stored history changes only when
    the recommendation does). Returns (count, new history, the holding run or None)."""
    up, down = recommendation, recommendation
    up_by = down_by = None
    for _first, last, rec in history:
        if last > now_ms - up_ms and rec < up:
            up, up_by = rec, last
        if last > now_ms - down_ms and rec > down:
            down, down_by = rec, last
    count = min(max(current, up), down)
    hold = None
    if count < recommendation and up_by is not None:
        hold = {"direction": "up", "at": up_by, "until": up_by + up_ms, "count": count}
    elif count > recommendation and down_by is not None:
        hold = {"direction": "down", "at": down_by, "until": down_by + down_ms, "count": count}
    keep = max(up_ms, down_ms)
    runs = [list(r) for r in history if r[1] > now_ms - keep]
    if runs and runs[-1][2] == recommendation:
        runs[-1][1] = now_ms
    else:
        runs.append([now_ms, now_ms, recommendation])
    return count, prune_runs(runs), hold


#: Runs a stored history keeps at most, after the exact pruning below: a recommendation that
#: changes at every tick within a long window would otherwise grow the document (and each
#: reconcile's work) with the window, not with what exists. Past it the oldest runs go, so a
#: stabilization hold can end early only after this many distinct changes inside one window.
MAX_HISTORY_RUNS = 1_000


def prune_runs(runs: list[list[int]]) -> list[list[int]]:
    """Drop the runs no decision can use, then cap at MAX_HISTORY_RUNS (the newest kept). A run
    with a newer run recommending less *and* a newer run recommending more is never chosen: while it
    is inside a window so are both newer ones (runs are in time order), so the lowest in the up
    window and the highest in the down window are elsewhere. Exact: `stabilize` decides the same."""
    kept: list[list[int]] = []
    low = high = None  # the lowest and highest recommendation of the newer runs
    for run in reversed(runs):
        rec = run[2]
        if low is None or not (low < rec < high):
            kept.append(run)
        low = rec if low is None else min(low, rec)
        high = rec if high is None else max(high, rec)
        if len(kept) == MAX_HISTORY_RUNS:
            break
    kept.reverse()
    return kept


def decide(h: dict, current: int, instances, events: dict, now_ms: int, history,
           tz: str = "UTC") -> Decision:
    terms = [_metric_term(t, current, instances) for t in h.get("targets") or []]
    terms += [_event_term(e, current, events or {}) for e in h.get("events") or []]
    readable = [t for t in terms if t["recommendation"] is not None]
    reasons = [f"{t['term']}: {t['error']}" for t in terms if t["recommendation"] is None]
    if not readable:
        recommended, term = current, "none"
        reasons.append("no metric readable: no change")
    else:
        best = max(readable, key=lambda t: t["recommendation"])
        recommended, term = best["recommendation"], best["term"]
        if len(readable) < len(terms) and recommended < current:
            reasons.append(f"a metric cannot be read: the scale-down to {recommended} is blocked")
            recommended, term = current, "blocked"
    floor, sched = schedule_floor(h.get("schedules"), now_ms, tz)
    if floor is not None and floor > recommended:
        recommended, term = floor, "schedule"
        reasons.append(f"schedule {sched['start']}-{sched['end']} sets a floor of {floor}")
    stab = h.get("stabilization") or {}
    count, new_history, hold = stabilize(recommended, current, now_ms, history or [],
                                         stab.get("scale_up", 0), stab.get("scale_down", 300_000))
    if hold:
        reasons.append(f"held at {hold['count']} until {_clock(hold['until'], tz)} by a recommendation "
                       f"at {_clock(hold['at'], tz)} (scale_{hold['direction']} window)")
    low, high = h.get("min") or 0, h.get("max")
    desired, clamp = count, None
    if desired < low:
        desired, clamp = low, f"raised to min {low}"
    elif high is not None and desired > high:
        desired, clamp = high, f"lowered to max {high}"
    if clamp:
        reasons.append(f"{count} {clamp}")
    if readable and term not in ("schedule", "blocked", "none"):
        reasons.insert(0, f"{term} recommends {recommended}")
    return Decision(current, recommended, desired, term, terms, reasons, new_history, hold, clamp, floor)


def _clock(ms: int, tz: str) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, ZoneInfo(tz)).strftime("%H:%M:%S")
