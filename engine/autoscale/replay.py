"""`cca autoscale replay`: the same decision code over a hand-written timeline (docs/autoscale.md).

The file: {"service": ".cca text", "start": RFC3339, "instances": N, "steps": [...]}; each step
{"at": DURATION, "instances": [...], "events": {...}} or {"at": DURATION, "same": true}. Replay
starts with an empty recommendation history; the result is one decision per step.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from ccattler.dsl import quantities as q
from ccattler.dsl.compiler import compile_sources
from ccattler.dsl.errors import DslError
from ccattler.dsl.sources import Source
from ccattler.engine.autoscale import calc, horizontal, vertical
from ccattler.engine.facts import CcaError, service_doc

MI = 2**20
_STATES = {calc.RUNNING, calc.PENDING, calc.FAILED, calc.STOPPING}
_INSTANCE_FIELDS = {"name", "state", "ready", "started", "cpu_initializing", "cpu_request_m",
                    "cpu_usage_m", "memory_request_mi", "memory_usage_mi", "metrics"}


class ReplayError(CcaError):
    """The replay file is malformed; the message names the field."""


def _duration(text, where: str) -> int:
    if not isinstance(text, str):
        raise ReplayError(f"{where}: expected a duration string such as \"30s\", got {text!r}")
    sign = -1 if text.startswith("-") else 1
    try:
        return sign * q.duration(text.lstrip("-"))
    except q.QuantityError as exc:
        raise ReplayError(f"{where}: {exc}") from None


def _time(text, where: str) -> int:
    try:
        t = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise ReplayError(f"{where}: expected an RFC3339 time such as 2026-01-05T09:00:00Z, "
                          f"got {text!r}") from None
    if t.tzinfo is None:
        raise ReplayError(f"{where}: {text!r} has no time zone (add Z or +01:00)")
    return int(t.timestamp() * 1000)


def _number(value, where: str, lowest: float = 0):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < lowest:
        raise ReplayError(f"{where}: expected a number ≥ {lowest}, got {value!r}")
    return value


def _service(text) -> dict:
    if not isinstance(text, str):
        raise ReplayError("service: expected the service's .cca source text")
    try:
        facts = compile_sources([Source("service", text)])
    except DslError as exc:
        raise ReplayError(f"service: {exc}") from None
    services = [d for d in facts.values() if d.get("kind") == "service"]
    if len(services) != 1:
        raise ReplayError(f"service: expected exactly one service block, found {len(services)}")
    doc = services[0]
    if not service_doc.horizontal(doc) and not service_doc.vertical(doc):
        raise ReplayError(f"service: {doc['name']} has no scale block")
    return doc


def _instance(raw, where: str) -> calc.Instance:
    """One instance of a step; a request it does not state is None (the service's current
    requests, which a vertical change moves, fill it in: `_requested`)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ReplayError(f"{where}: expected an object with a name")
    unknown = set(raw) - _INSTANCE_FIELDS
    if unknown:
        raise ReplayError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    state = raw.get("state", calc.RUNNING)
    if state not in _STATES:
        raise ReplayError(f"{where}.state: expected one of {sorted(_STATES)}, got {state!r}")
    if "started" in raw:
        started = raw["started"]
        (_time if isinstance(started, str) and "T" in started else _duration)(started, f"{where}.started")
    requests: dict = {"cpu": None, "memory": None}
    samples = {}
    if "cpu_request_m" in raw:
        requests["cpu"] = _number(raw["cpu_request_m"], f"{where}.cpu_request_m")
    if "memory_request_mi" in raw:
        requests["memory"] = _number(raw["memory_request_mi"], f"{where}.memory_request_mi") * MI
    if "cpu_usage_m" in raw:
        samples["cpu"] = _number(raw["cpu_usage_m"], f"{where}.cpu_usage_m")
    if "memory_usage_mi" in raw:
        samples["memory"] = int(_number(raw["memory_usage_mi"], f"{where}.memory_usage_mi") * MI)
    metrics = raw.get("metrics", {})
    if not isinstance(metrics, dict):
        raise ReplayError(f"{where}.metrics: expected an object of metric name to number")
    for name, value in metrics.items():
        samples[name] = _number(value, f"{where}.metrics.{name}")
    return calc.Instance(raw["name"], state=state, ready=bool(raw.get("ready", True)),
                         cpu_initializing=bool(raw.get("cpu_initializing", False)),
                         requests=requests, samples=samples)


def load(data) -> dict:
    """Validate a parsed replay file; return {service, start, instances, steps: [(at, insts, events)]}."""
    if not isinstance(data, dict):
        raise ReplayError("the file must hold a JSON object")
    doc = _service(data.get("service"))
    start = _time(data.get("start"), "start")
    count = data.get("instances", doc.get("instances", 1))
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ReplayError(f"instances: expected a count ≥ 0, got {count!r}")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ReplayError("steps: expected a non-empty list")
    steps, previous = [], None
    for n, raw in enumerate(raw_steps):
        where = f"steps[{n}]"
        if not isinstance(raw, dict):
            raise ReplayError(f"{where}: expected an object")
        at = _duration(raw.get("at"), f"{where}.at")
        if raw.get("same"):
            if previous is None:
                raise ReplayError(f"{where}: \"same\" needs a previous step")
            insts, events = previous
        else:
            rows = raw.get("instances", [])
            if not isinstance(rows, list):
                raise ReplayError(f"{where}.instances: expected a list")
            insts = [_instance(r, f"{where}.instances[{i}]") for i, r in enumerate(rows)]
            events = raw.get("events", {})
            if not isinstance(events, dict):
                raise ReplayError(f"{where}.events: expected an object of source to number")
            for k, v in events.items():
                _number(v, f"{where}.events.{k}")
        previous = (insts, events)
        steps.append((at, insts, events))
    return {"service": doc, "start": start, "instances": count, "steps": steps}


def run(data, tz: str = "UTC") -> list[dict]:
    """Replay: one {"at", "recommended", "desired", "term", "reasons"[, "vertical"]} per step."""
    plan = load(data)
    doc = plan["service"]
    h, v = doc["scale"].get("horizontal"), doc["scale"].get("vertical")
    current, history = plan["instances"], []
    requests = dict(service_doc.resources(doc))
    windows: dict[str, list[tuple]] = {}  # instance → its (at, cpu, memory) samples in the window
    vstate, out = {}, []
    for at, stated, events in plan["steps"]:
        now = plan["start"] + at
        insts = [_requested(i, requests) for i in stated]
        row = {"at": _at(at)}
        if h:
            d = horizontal.decide(h, current, insts, events, now, history, tz)
            history, current = d.history, d.desired
            row.update(recommended=d.recommended, desired=d.desired, term=d.term, reasons=d.reasons)
        else:
            row.update(recommended=current, desired=current, term="none", reasons=[])
        if v:
            running = [i for i in insts if i.state == calc.RUNNING]
            for i in running:  # each instance's own window, as its agent keeps it (agent/telemetry.py)
                seen = windows.setdefault(i.name, [])
                seen.append((now, i.samples.get("cpu"), i.samples.get("memory")))
                seen[:] = [s for s in seen if s[0] > now - vertical.WINDOW_MS]
            usage = [[now, *(_window_p95(windows[i.name], k) for k in (1, 2))] for i in running]
            requests, vstate, reasons, _ = vertical.recommend(v, requests, usage, now, vstate)
            row["reasons"] = row["reasons"] + reasons
            row["vertical"] = {"cpu_m": requests.get("cpu"),
                               "memory_mi": (requests.get("memory") or 0) // MI or None}
        out.append(row)
    return out


def _requested(inst: calc.Instance, requests: dict) -> calc.Instance:
    """`inst` with the service's current requests where the file states none: after a vertical
    change the horizontal cpu/memory terms use the applied requests, as the live controller does."""
    filled = {k: v if v is not None else requests.get(k) for k, v in inst.requests.items()}
    return dataclasses.replace(inst, requests=filled)


def _window_p95(samples: list[tuple], index: int) -> float | None:
    values = [s[index] for s in samples if s[index] is not None]
    return vertical.p95(values) if values else None


def _at(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def run_file(path: str, tz: str = "UTC") -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise ReplayError(f"{path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ReplayError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return run(data, tz)
