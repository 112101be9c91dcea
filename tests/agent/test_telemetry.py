"""Telemetry: memory and processes published at once, cpu as a rate from the second sample, and
rewritten only on a meaningful change or
after the refresh period (no write amplification)."""

from __future__ import annotations

from ccattler.agent.runtime.base import Usage
from ccattler.agent.telemetry import Telemetry


class FakeRuntime:
    def __init__(self) -> None:
        self.usage = {"t/a": Usage(0.0, 10 << 20, 2)}

    def stats(self, name: str) -> Usage:
        return self.usage[name]


def test_published_on_meaningful_change_or_refresh() -> None:
    now = [0.0]
    runtime = FakeRuntime()
    telemetry = Telemetry(runtime, interval=10, refresh=60, clock=lambda: now[0])
    telemetry.sample(["t/a"])
    assert telemetry.usage("t/a") == {"memory": 10 << 20, "pids": 2}  # no rate yet: no cpu
    now[0] = 10.0
    runtime.usage["t/a"] = Usage(5.0, (10 << 20) + 4096, 2)  # half a cpu; memory barely moved
    telemetry.sample(["t/a"])
    assert telemetry.usage("t/a") == {"cpu": 500, "memory": (10 << 20) + 4096, "pids": 2}
    now[0] = 20.0
    runtime.usage["t/a"] = Usage(10.1, (10 << 20) + 8192, 2)  # 510m: within noise
    telemetry.sample(["t/a"])
    assert telemetry.usage("t/a")["cpu"] == 500
    now[0] = 25.0  # before the interval: not even sampled
    runtime.usage["t/a"] = Usage(10.1, 100 << 20, 9)
    telemetry.sample(["t/a"])
    assert telemetry.usage("t/a")["pids"] == 2
    now[0] = 30.0
    telemetry.sample(["t/a"])
    assert telemetry.usage("t/a") == {"cpu": 0, "memory": 100 << 20, "pids": 9}
    now[0] = 95.0
    runtime.usage["t/a"] = Usage(10.2, (100 << 20) + 1, 9)
    telemetry.sample(["t/a"])  # small change, but a minute passed: refreshed
    assert telemetry.usage("t/a")["memory"] == (100 << 20) + 1


def test_gone_instances_are_forgotten() -> None:
    telemetry = Telemetry(FakeRuntime(), interval=0)
    telemetry.sample(["t/a"])
    telemetry.sample([])
    assert telemetry.usage("t/a") is None


def test_the_first_sample_has_no_cpu_not_a_zero() -> None:
    """A busy container's first sample must not read as idle (0m): the vertical autoscaler would
    recommend its minimum and the HPA count it as a sample of 0. The cpu appears with the second."""
    now = [0.0]
    runtime = FakeRuntime()
    runtime.usage["t/a"] = Usage(100.0, 10 << 20, 2)  # 100 cpu-seconds already spent
    telemetry = Telemetry(runtime, interval=10, refresh=60, clock=lambda: now[0])
    telemetry.sample(["t/a"])
    assert "cpu" not in telemetry.usage("t/a")
    now[0] = 10.0
    runtime.usage["t/a"] = Usage(110.0, 10 << 20, 2)  # a whole cpu; nothing else moved
    telemetry.sample(["t/a"])
    assert telemetry.usage("t/a") == {"cpu": 1000, "memory": 10 << 20, "pids": 2}  # written at once
