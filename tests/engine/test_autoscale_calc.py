"""The HPA replica calculator, table-driven with cases ported from kubernetes'
pkg/controller/podautoscaler/replica_calculator_test.go (names kept; values in millicores)."""

import pytest

from ccattler.engine.autoscale import calc
from ccattler.engine.autoscale.calc import Instance


def pods(levels, requests=1000, ready=None, states=None, hot=None, metric="cpu"):
    """One instance per entry of `ready`/`states` (else per level); `levels[i] is None` = no sample."""
    n = max(len(levels), len(ready or []), len(states or []))
    out = []
    for i in range(n):
        reqs = requests[i] if isinstance(requests, list) else requests
        level = levels[i] if i < len(levels) else None
        out.append(Instance(f"p{i}", state=(states or ["running"] * n)[i], ready=(ready or [True] * n)[i],
                            cpu_initializing=(hot or [False] * n)[i],
                            requests={"cpu": reqs, "memory": reqs},
                            samples={} if level is None else {metric: level}))
    return out


RESOURCE = [
    # name, current, target %, instances, expected replicas, expected utilisation
    ("ScaleUp", 3, 30, pods([300, 500, 700]), 5, 50),
    ("ScaleUpUnreadyLessScale", 3, 30, pods([300, 500, 700], ready=[False, True, True]), 4, 60),
    ("ScaleUpHotCpuLessScale", 3, 30, pods([300, 500, 700], hot=[True, False, False]), 4, 60),
    ("ScaleUpUnreadyNoScale", 3, 30, pods([400, 500, 700], ready=[True, False, False]), 3, 40),
    ("ScaleHotCpuNoScale", 3, 30, pods([400, 500, 700], hot=[False, True, True]), 3, 40),
    ("ScaleUpIgnoresFailedPods", 2, 30,
     pods([500, 700, None, None], states=["running", "running", "failed", "failed"]), 4, 60),
    ("ScaleUpIgnoresDeletionPods", 2, 30,
     pods([500, 700, None, None], states=["running", "running", "stopping", "stopping"]), 4, 60),
    ("ScaleDown", 5, 50, pods([100, 300, 500, 250, 250]), 3, 28),
    ("ScaleDownIgnoresUnreadyPods", 5, 50,
     pods([100, 300, 500, 250, 250], ready=[True, True, True, False, False]), 2, 30),
    ("ScaleDownIgnoresDeletionPods", 5, 50,
     pods([100, 300, 500, 250, 250, None, None], states=["running"] * 5 + ["stopping"] * 2), 3, 28),
    ("Tolerance", 3, 100, pods([1010, 1030, 1020], requests=[900, 1000, 1100]), 3, 102),
    ("MissingMetrics", 4, 100, pods([400, 95, None, None]), 3, 24),
    ("MissingMetricsNoChangeEq", 2, 100, pods([1000, None]), 2, 100),
    ("MissingMetricsNoChangeGt", 2, 100, pods([1900, None]), 2, 190),
    ("MissingMetricsNoChangeLt", 2, 100, pods([600, None]), 2, 60),
    ("MissingMetricsUnreadyChange", 3, 50, pods([100, 450, None], ready=[False, True, True]), 3, 45),
    ("MissingMetricsUnreadyScaleUp", 3, 50, pods([100, 2000, None], ready=[False, True, True]), 4, 200),
    ("MissingMetricsUnreadyScaleDown", 4, 50,
     pods([100, 100, 100, None], ready=[False, True, True, True]), 3, 10),
    ("MissingMetricsScaleDownTargetOver100", 4, 300,
     pods([200, 100, 100, None], requests=[1000, 1000, 2000, 2000], ready=[False, True, True, True]), 2, 6),
    ("DuringRollingUpdateWithMaxSurge", 2, 50, pods([100, 100, None]), 2, 10),
    # not from the HPA's file: a pending instance is unready for every metric
    ("PendingIsUnready", 3, 30, pods([300, 500, None], states=["running", "running", "pending"]), 3, 40),
]


@pytest.mark.parametrize("name,current,target,instances,replicas,util", RESOURCE,
                         ids=[r[0] for r in RESOURCE])
def test_resource_replicas(name, current, target, instances, replicas, util):
    r = calc.resource_replicas(current, target, "cpu", instances)
    assert (r.replicas, r.observed) == (replicas, util)


PER_INSTANCE = [
    ("ScaleUpCM", 3, 15, pods([20, 10, 30], metric="rps"), 4, 20),
    ("ScaleUpCMUnreadyHotCpuNoLessScale", 3, 15,
     pods([50, 10, 30], ready=[False, True, True], hot=[True, False, False], metric="rps"), 6, 30),
    ("ScaleUpCMUnreadyHotCpuScaleWouldScaleDown", 3, 15,
     pods([50, 15, 30], ready=[False, True, False], metric="rps"), 7, 31.666),
    ("ScaleDownCM", 5, 20, pods([12, 12, 12, 12, 12], metric="rps"), 3, 12),
    ("ToleranceCM", 3, 20, pods([20, 21, 21], metric="rps"), 3, 20.666),
    ("DuringRollingUpdateWithMaxSurgeCM", 2, 17, pods([10, 10, None], metric="rps"), 2, 10),
    ("MissingScaleUpCM", 3, 10, pods([30, 30, None], metric="rps"), 6, 30),
    ("PendingScaleUpCM", 3, 10, pods([30, 30, None], states=["running", "running", "pending"],
                                      metric="rps"), 6, 30),
]


@pytest.mark.parametrize("name,current,target,instances,replicas,avg", PER_INSTANCE,
                         ids=[r[0] for r in PER_INSTANCE])
def test_per_instance_replicas(name, current, target, instances, replicas, avg):
    r = calc.per_instance_replicas(current, target, "rps", instances)
    assert r.replicas == replicas and r.observed == pytest.approx(avg, abs=0.001)


def test_no_samples_is_an_error_not_a_count():
    with pytest.raises(calc.NoMetrics):
        calc.resource_replicas(3, 50, "cpu", pods([None, None, None]))
    with pytest.raises(calc.NoMetrics):
        calc.resource_replicas(1, 50, "cpu", pods([100], requests=0))
    with pytest.raises(calc.NoMetrics):
        calc.per_instance_replicas(3, 5, "rps", pods([None], metric="rps"))


@pytest.mark.parametrize("current,value,k,expected", [
    (1, 8.6, 4.4, 2),      # ScaleUpCMExternal (AverageValue)
    (3, 8.6, 2.9, 3),      # ToleranceCMExternalPerPod
    (5, 8.6, 4.4, 2),      # ScaleDownCMExternal
    (0, 40, 20, 2),
    (3, 0, 20, 0),
])
def test_event_replicas(current, value, k, expected):
    assert calc.event_replicas(current, value, k) == expected


@pytest.mark.parametrize(("case", "ready", "started", "since", "at", "window", "aside"), [
    # inside the 5-minute cpu initialization period (now = 1000)
    ("young, ready long enough before the sample", True, 900, 905, 990, 10, False),
    ("young, the sample's window reaches back before it became ready", True, 900, 985, 990, 10, True),
    ("young, unready", False, 900, 905, 990, 10, True),
    ("young, no sample time", True, 900, 905, None, None, True),
    # past it
    ("old, ready", True, 100, 110, 990, 10, False),
    ("old, unready but it had been ready (went unready later)", False, 100, 500, 990, 10, False),
    ("old, unready and never ready (last change within 30 s of the start)", False, 100, 110, 990, 10, True),
])
def test_cpu_set_aside_is_the_hpas_rule(case, ready, started, since, at, window, aside):
    assert calc.cpu_set_aside(ready, started, since, at, window, 1000.0) is aside, case


def test_a_known_verdict_replaces_the_ready_and_initializing_flags():
    """An unready instance past its initialization that had been ready counts with its sample."""
    req = {"cpu": 1000}
    counted = calc.Instance("a", ready=False, requests=req, samples={"cpu": 900}, cpu_unready=False)
    other = calc.Instance("b", requests=req, samples={"cpu": 900})
    assert calc.resource_replicas(2, 50, "cpu", [counted, other]).ready == 2
    aside = calc.Instance("a", ready=False, requests=req, samples={"cpu": 900})
    assert calc.resource_replicas(2, 50, "cpu", [aside, other]).ready == 1
