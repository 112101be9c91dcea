"""The structured parts of a service: probes, placement and scaling (docs/facts.md shapes)."""

from __future__ import annotations

from collections.abc import Mapping

from ccattler.dsl import quantities as q
from ccattler.dsl.ast import ListValue, Node
from ccattler.dsl.compiler.context import Unit
from ccattler.dsl.limits import MAX_INSTANCES
from ccattler.engine.facts.service_doc import HORIZONTAL_STABILIZATION, VERTICAL_STABILIZATION

_PROBE_DEFAULTS = {"every": 10_000, "timeout": 1_000, "failure_threshold": 3, "success_threshold": 1,
                   "initial_delay": 0}
_PERCENT_METRICS = ("cpu", "memory")


def compile_probes(u: Unit, fields: dict[str, Node], first_port: int | None, what: str) -> dict:
    """`health` is liveness; each probe gets every default filled in."""
    if "health" in fields and "liveness" in fields:
        u.warn(fields["health"].keyword_span, "duplicate-probe",
               f"{what} has both health and liveness; health is shorthand for liveness, so liveness is used")
    probes = {}
    for kind in ("liveness", "startup", "readiness"):
        node = fields.get(kind) or (fields.get("health") if kind == "liveness" else None)
        probes[kind] = _probe(u, node, first_port) if node else None
    return {"liveness": probes["liveness"], "startup": probes["startup"], "readiness": probes["readiness"]}


def _probe(u: Unit, node: Node, first_port: int | None) -> dict:
    f = u.singles(node, node.keyword)
    kinds = [k for k in ("http", "tcp", "exec") if k in f]
    if len(kinds) != 1:
        u.error(node.keyword_span, "bad-probe", f"{node.keyword} needs exactly one of http, tcp or exec")
    kind = kinds[0] if kinds else "tcp"
    port = u.value(f.get("port"), q.port, first_port)
    if kind != "exec" and port is None:
        u.error(node.keyword_span, "bad-probe", f"{node.keyword} needs a port: add `port N` or expose one")
    path = None
    if kind == "http":
        path = u.value(f["http"], None, "/")
        if not path.startswith("/"):
            u.error(f["http"].values[0].span, "bad-path", f'http path "{path}" must start with /')
    probe = {"type": kind, "path": path, "command": u.value(f.get("exec")),
             "port": port if kind != "exec" else u.value(f.get("port"), q.port)}
    for name, default in _PROBE_DEFAULTS.items():
        reader = q.count if name.endswith("threshold") else q.duration
        probe[name] = u.value(f.get(name), reader, default)
    return probe


def compile_placement(u: Unit, node: Node | None, tenant: str) -> dict:
    out = {"require": [], "prefer": [], "accept": [], "zone": None, "zone_spread": False,
           "architecture": None, "colocate": [], "separate": []}
    if node is None:
        return out
    u.singles(node, "placement", frozenset({"require", "prefer", "accept", "colocate", "separate"}))
    for item in node.body or ():
        kw = item.keyword
        if kw == "require":
            out["require"].append({"key": item.key.value, "value": item.values[0].value})
        elif kw == "prefer":
            weight = u.read(item.option("weight"), q.count, 1)
            out["prefer"].append({"key": item.key.value, "value": item.values[0].value, "weight": weight})
        elif kw == "accept":
            out["accept"].append(item.values[0].value)
        elif kw == "zone":
            if "spread" in item.flags:
                out["zone_spread"] = True
            else:
                out["zone"] = item.values[0].value
        elif kw == "architecture":
            out["architecture"] = item.values[0].value
        else:  # colocate / separate
            resolved = u.resolve("service", item.values[0], tenant)
            if resolved:
                out[kw].append(resolved)
    return out


def compile_scale(u: Unit, node: Node | None) -> dict | None:
    if node is None:
        return None
    f = u.singles(node, "scale")
    return {"horizontal": _horizontal(u, f.get("horizontal")), "vertical": _vertical(u, f.get("vertical"))}


def _horizontal(u: Unit, node: Node | None) -> dict | None:
    if node is None:
        return None
    f = u.singles(node, "horizontal", frozenset({"target", "event", "schedule"}))
    low = u.value(f.get("min"), q.count, 1)
    high = u.value(f.get("max"), q.count)
    if isinstance(high, int) and high > MAX_INSTANCES:
        u.error(f["max"].values[0].span, "too-many",
                f"max {high} is over the limit of {MAX_INSTANCES} instances per service")
    if "max" not in f:
        u.error(node.keyword_span, "missing-field", "horizontal scaling needs max")
    if low is not None and high is not None and low > high:
        u.error(f["min"].values[0].span, "min-max", f"min {low} is greater than max {high}")
    targets = []
    for item in node.fields("target"):
        metric = item.key.value
        value, percent = u.read(item.values[0], q.percent_or_number, (None, False))
        if metric in _PERCENT_METRICS:
            percent = True
        elif percent:
            u.error(item.values[0].span, "bad-quantity",
                    f'target {metric} is a per-instance rate; only cpu and memory take a percentage')
        targets.append({"metric": metric, "value": value, "percent": percent})
    events = [{"source": e.key.value, "per_instance": u.read(e.values[0], q.count)}
              for e in node.fields("event")]
    schedules = [_schedule(u, s) for s in node.fields("schedule")]
    return {"min": low, "max": high, "targets": targets, "events": events, "schedules": schedules,
            "stabilization": _stabilization(u, f.get("stabilization"), HORIZONTAL_STABILIZATION)}


def _stabilization(u: Unit, node: Node | None, defaults: Mapping[str, int]) -> dict[str, int]:
    """`stabilization { scale_up D  scale_down D }` in milliseconds, each defaulted."""
    if node is None:
        return dict(defaults)
    sf = u.singles(node, "stabilization")
    return {way: u.value(sf.get(way), q.duration, default) for way, default in defaults.items()}


def _schedule(u: Unit, node: Node) -> dict:
    f = u.singles(node, "schedule")
    for needed in ("days", "start", "end", "minimum"):
        if needed not in f:
            u.error(node.keyword_span, "missing-field", f"schedule needs {needed}")
    days = None
    if "days" in f:
        words: ListValue = f["days"].values[0]
        try:
            days = q.days([w.value for w in words.items])
        except q.QuantityError as exc:
            u.error(words.span, exc.code, str(exc))
    return {"days": days, "start": u.value(f.get("start"), q.clock), "end": u.value(f.get("end"), q.clock),
            "minimum": u.value(f.get("minimum"), q.count)}


def _vertical(u: Unit, node: Node | None) -> dict | None:
    if node is None:
        return None
    f = u.singles(node, "vertical")
    out = {}
    for resource, reader in (("cpu", q.cpu), ("memory", q.size)):
        part = f.get(resource)
        if part is None:
            out[resource] = None
            continue
        bounds = u.singles(part, resource)
        low, high = u.value(bounds.get("min"), reader), u.value(bounds.get("max"), reader)
        if low is not None and high is not None and low > high:
            u.error(bounds["min"].values[0].span, "min-max", f"vertical {resource} min is greater than max")
        out[resource] = {"min": low, "max": high}
    out["stabilization"] = _stabilization(u, f.get("stabilization"), VERTICAL_STABILIZATION)
    return out
