"""Telemetry: memory and processes published at once, cpu as a rate from the second sample, each
instance's P95 over the vertical window beside them, and rewritten only on a meaningful change or
after the refresh period (no write amplification)."""

from __future__ import annotations

from ccattler.agent.runtime.base import Usage
from ccattler.agent.telemetry import Telemetry

CURRENT = ("cpu", "memory", "pids")


class FakeRuntime:
    def __init__(self) -> None:
        self.usage = {"t/a": Usage(0.0, 10 << 20, 2)}

    def stats(self, name: str) -> Usage:
        return self.usage[name]


def current(telemetry: Telemetry, name: str = "t/a") -> dict[str, int]:
    return {k: v for k, v in (telemetry.usage(name) or {}).items() if k in CURRENT}


def test_published_on_meaningful_change_or_refresh() -> None:
    now = [0.0]
    runtime = FakeRuntime()
    telemetry = Telemetry(runtime, interval=10, refresh=60, window=15, clock=lambda: now[0])
    telemetry.sample(["t/a"])
    assert current(telemetry) == {"memory": 10 << 20, "pids": 2}  # no rate yet: no cpu
    now[0] = 10.0
    runtime.usage["t/a"] = Usage(5.0, (10 << 20) + 4096, 2)  # half a cpu; memory barely moved
    telemetry.sample(["t/a"])
    assert current(telemetry) == {"cpu": 500, "memory": (10 << 20) + 4096, "pids": 2}
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
    assert current(telemetry) == {"cpu": 0, "memory": 100 << 20, "pids": 9}
    now[0] = 95.0
    runtime.usage["t/a"] = Usage(10.2, (100 << 20) + 1, 9)
    telemetry.sample(["t/a"])  # small change, but a minute passed: refreshed
    assert telemetry.usage("t/a")["memory"] == (100 << 20) + 1


def test_the_first_sample_has_no_cpu_not_a_zero() -> None:
    """A busy container's first sample must not read as idle (0m): the vertical autoscaler would
    recommend its minimum and the HPA count it as a sample of 0. The cpu appears with the second."""
    now = [0.0]
    runtime = FakeRuntime()
    runtime.usage["t/a"] = Usage(100.0, 10 << 20, 2)  # 100 cpu-seconds already spent
    telemetry = Telemetry(runtime, interval=10, refresh=60, clock=lambda: now[0], wall=lambda: 7000 + now[0])
    telemetry.sample(["t/a"])
    assert "cpu" not in telemetry.usage("t/a") and "cpu_p95" not in telemetry.usage("t/a")
    now[0] = 10.0
    runtime.usage["t/a"] = Usage(110.0, 10 << 20, 2)  # a whole cpu; nothing else moved
    telemetry.sample(["t/a"])
    assert telemetry.usage("t/a") == {"cpu": 1000, "memory": 10 << 20, "pids": 2,  # written at once
                                      "cpu_p95": 1000, "memory_p95": 10 << 20,
                                      "at": 7010.0, "window": 10.0}  # when, and over how long


def test_the_p95_covers_the_window_and_forgets_older_samples() -> None:
    """A burst stays in `cpu_p95` for the window (60 s here), then leaves it; the current value
    follows each interval. Nearest rank: the P95 of up to 19 samples is their maximum."""
    now, spent = [0.0], [0.0]
    runtime = FakeRuntime()
    telemetry = Telemetry(runtime, interval=10, refresh=60, window=60, clock=lambda: now[0])

    def tick(cpu_m: int) -> dict[str, int]:
        now[0] += 10
        spent[0] += cpu_m / 1000 * 10
        runtime.usage["t/a"] = Usage(spent[0], 10 << 20, 2)
        telemetry.sample(["t/a"])
        return telemetry.usage("t/a")

    telemetry.sample(["t/a"])
    assert tick(100)["cpu_p95"] == 100
    burst = tick(900)
    assert burst["cpu"] == 900 and burst["cpu_p95"] == 900
    for _ in range(5):  # still inside the window: the burst is the P95 while cpu is back at 100
        steady = tick(100)
    assert steady["cpu"] == 100 and steady["cpu_p95"] == 900
    assert tick(100)["cpu_p95"] == 100  # the burst's sample is 60 s old: out of the window


def test_gone_instances_are_forgotten() -> None:
    telemetry = Telemetry(FakeRuntime(), interval=0)
    telemetry.sample(["t/a"])
    telemetry.sample([])
    assert telemetry.usage("t/a") is None
