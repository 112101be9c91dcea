"""The Kubernetes HPA replica calculator, ported (pkg/controller/podautoscaler/replica_calculator.go).

One function per metric kind, each a pure function of the instances' samples; the arithmetic is the
HPA's: resource utilisation in whole percent (integer division), per-instance metrics as milli-units
averaged with integer division, a ±tolerance band, missing samples as 0 on a scale-up and as 100 % of
the request (or the target, if higher) on a scale-down, unready instances as 0 on a scale-up only,
and the two re-checks (back inside the band or a flipped direction keep the count).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TOLERANCE = 0.1

RUNNING, PENDING, FAILED, STOPPING = "running", "pending", "failed", "stopping"


@dataclass(frozen=True)
class Instance:
    """One instance as the calculator sees it. `samples` maps a metric name (`cpu` in millicores,
    `memory` in bytes, anything else per-instance units) to its value; absent = no sample."""
    name: str
    state: str = RUNNING
    ready: bool = True
    cpu_initializing: bool = False
    requests: dict = field(default_factory=dict)  # cpu (m), memory (bytes)
    samples: dict = field(default_factory=dict)
    #: The HPA's cpu verdict from the start and readiness-transition times (`cpu_set_aside`), when
    #: they are known; None: set aside when not ready or `cpu_initializing` (replay gives those).
    cpu_unready: bool | None = None


#: The HPA's defaults (--horizontal-pod-autoscaler-cpu-initialization-period, -initial-readiness-delay).
CPU_INITIALIZATION_S, INITIAL_READINESS_DELAY_S = 300.0, 30.0


def cpu_set_aside(ready: bool, started: float, ready_since: float, sample_at: float | None,
                  sample_window: float | None, now: float) -> bool:
    """groupPods' cpu rule: within the cpu initialization period after the start, an instance is set
    aside when unready or when its sample's window reaches back before its last readiness change;
    after it, only when it is unready and has never been ready (its last change came within the
    initial readiness delay of the start)."""
    if started + CPU_INITIALIZATION_S > now:
        if sample_at is None or sample_window is None:
            return True
        return not ready or sample_at < ready_since + sample_window
    return not ready and started + INITIAL_READINESS_DELAY_S > ready_since


class NoMetrics(Exception):
    """The metric cannot be read for any counted instance (the HPA's 'did not receive metrics')."""


@dataclass
class Result:
    replicas: int
    observed: float          # utilisation % (resource) or average per-instance value
    ready: int
    unready: int
    missing: int
    ignored: int


def _group(instances, metric: str):
    """groupPods: (ready count, unready names, missing names, ignored names, samples of the rest)."""
    ready, unready, missing, ignored, samples = 0, [], [], [], {}
    for i in instances:
        if i.state in (FAILED, STOPPING):
            ignored.append(i.name)
            continue
        if i.state == PENDING:
            unready.append(i.name)
            continue
        if metric not in i.samples or i.samples[metric] is None:
            missing.append(i.name)
            continue
        aside = i.cpu_unready if i.cpu_unready is not None else not i.ready or i.cpu_initializing
        if metric == "cpu" and aside:
            unready.append(i.name)
            continue
        ready += 1
        samples[i.name] = i.samples[metric]
    return ready, unready, missing, ignored, samples


def _utilization(samples: dict, requests: dict, target: int) -> tuple[float, int]:
    """GetResourceUtilizationRatio: (usage ratio, utilisation in whole percent)."""
    total_use = total_req = 0
    for name, use in samples.items():
        if not requests.get(name):
            raise NoMetrics(f"missing request for {name}")
        total_use += use
        total_req += requests[name]
    if total_req == 0:
        raise NoMetrics("no request to measure against")
    util = int(total_use * 100 // total_req)
    return util / target, util


def resource_replicas(current: int, target_percent: int, resource: str, instances,
                      tolerance: float = TOLERANCE) -> Result:
    """GetResourceReplicas: `target_percent` of the `resource` request (cpu or memory)."""
    ready, unready, missing, ignored, samples = _group(instances, resource)
    requests = {i.name: int(i.requests.get(resource) or 0) for i in instances}
    if not samples:
        raise NoMetrics(f"no {resource} samples for the counted instances")
    ratio, util = _utilization(samples, requests, target_percent)
    res = Result(current, util, ready, len(unready), len(missing), len(ignored))
    up_with_unready = bool(unready) and ratio > 1.0
    if not up_with_unready and not missing:
        return _first_pass(res, ratio, ready, tolerance)
    if missing:
        if ratio < 1.0:
            fallback = max(100, target_percent)
            for name in missing:
                samples[name] = requests[name] * fallback // 100
        elif ratio > 1.0:
            for name in missing:
                samples[name] = 0
    if up_with_unready:
        for name in unready:
            samples[name] = 0
    new_ratio, _ = _utilization(samples, requests, target_percent)
    return _recheck(res, current, ratio, new_ratio, len(samples), tolerance)


def _first_pass(res: Result, ratio: float, ready: int, tolerance: float) -> Result:
    """No missing samples and nothing set aside: within the tolerance keep the count, else scale
    the ready instances by the ratio (the HPA's answer before its second pass)."""
    if abs(1.0 - ratio) > tolerance:
        res.replicas = math.ceil(ratio * ready)
    return res


def _recheck(res: Result, current: int, ratio: float, new_ratio: float, counted: int,
             tolerance: float) -> Result:
    if (abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0 < new_ratio)
            or (ratio > 1.0 > new_ratio)):
        return res
    replicas = math.ceil(new_ratio * counted)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return res
    res.replicas = replicas
    return res


def _milli(value) -> int:
    return int(round(float(value) * 1000))


def _usage_ratio(samples: dict, target_milli: int) -> tuple[float, int]:
    """GetMetricUsageRatio: the integer average of the samples (milli-units) over the target."""
    avg = sum(samples.values()) // len(samples)
    return avg / target_milli, avg


def per_instance_replicas(current: int, target: float, metric: str, instances,
                          tolerance: float = TOLERANCE) -> Result:
    """GetMetricReplicas (plainMetricUtilizationAndReplicaCount): `target` per instance."""
    ready, unready, missing, ignored, raw = _group(instances, metric)
    if not raw:
        raise NoMetrics(f"no {metric} samples for the counted instances")
    samples = {k: _milli(v) for k, v in raw.items()}
    target_m = _milli(target)
    ratio, avg = _usage_ratio(samples, target_m)
    res = Result(current, avg / 1000, ready, len(unready), len(missing), len(ignored))
    up_with_unready = bool(unready) and ratio > 1.0
    if not up_with_unready and not missing:
        return _first_pass(res, ratio, ready, tolerance)
    if missing:
        fill = target_m if ratio < 1.0 else 0
        if ratio != 1.0:
            for name in missing:
                samples[name] = fill
    if up_with_unready:
        for name in unready:
            samples[name] = 0
    new_ratio, _ = _usage_ratio(samples, target_m)
    return _recheck(res, current, ratio, new_ratio, len(samples), tolerance)


def event_replicas(current: int, value: float, per_instance: int,
                   tolerance: float = TOLERANCE) -> int:
    """GetExternalPerPodMetricReplicas: ceil(value / K), unless within the band of `current`."""
    if current > 0:
        ratio = value / (per_instance * current)
        if abs(1.0 - ratio) <= tolerance:
            return current
    return math.ceil(value / per_instance)
