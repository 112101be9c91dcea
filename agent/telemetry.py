"""Resource usage of the instances on this node (cpu millicores, memory bytes, process count), read
from the runtime (cgroups for runc) at a modest rate and published inside each instance's observed
document as `usage` — only when it changed meaningfully or has not been refreshed for `refresh`
seconds, so a busy node does not rewrite its documents every tick (the reporter sends only changed
documents). Beside the current values, `cpu_p95`/`memory_p95` are the instance's P95 over the
vertical autoscaler's window (engine/autoscale/vertical.py): the window lives here, where the
samples are, so the store holds one slowly moving value per instance instead of every sample."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ccattler.agent.runtime.base import Runtime, Usage
from ccattler.engine.autoscale.vertical import WINDOW_MS, p95
from ccattler.engine.facts import CcaError


@dataclass(frozen=True, slots=True)
class Published:
    """What was last published for one instance, and when."""

    cpu: int | None  # millicores; None until a second sample gives a rate
    memory: int  # bytes
    pids: int
    cpu_p95: int | None  # over the window's samples (None: no rate yet)
    memory_p95: int
    at: float  # the clock's time of the sample (refresh)
    sampled: float  # its unix time
    rate_over: float | None  # seconds the cpu rate covers

    def as_doc(self) -> dict[str, float]:
        """`at`/`window`: when the cpu rate was measured and over how many seconds (the
        autoscaler's cpu initialization rule compares them with the readiness transition)."""
        doc: dict[str, float] = {"memory": self.memory, "pids": self.pids, "memory_p95": self.memory_p95,
                                 "at": round(self.sampled, 3)}
        if self.cpu is not None:
            doc["cpu"] = self.cpu
        if self.cpu_p95 is not None:
            doc["cpu_p95"] = self.cpu_p95
        if self.rate_over is not None:
            doc["window"] = round(self.rate_over, 3)
        return doc


def _cpu_moved(old: int | None, new: int | None) -> bool:
    if old is None or new is None:
        return new != old
    return abs(new - old) >= 50 and abs(new - old) >= 0.2 * max(old, 1)


def _memory_moved(old: int, new: int) -> bool:
    return abs(new - old) >= 4 << 20 and abs(new - old) >= 0.1 * max(old, 1)


def meaningful(old: Published, new: Published) -> bool:
    """A change worth a write: cpu (or its P95) by 50m and 20% (or its first rate), memory (or its
    P95) by 4 MiB and 10%, or any process count."""
    return (_cpu_moved(old.cpu, new.cpu) or _cpu_moved(old.cpu_p95, new.cpu_p95)
            or _memory_moved(old.memory, new.memory) or _memory_moved(old.memory_p95, new.memory_p95)
            or new.pids != old.pids)


class Telemetry:
    """Samples every `interval` seconds; `usage(name)` is the published value (or None). A steady
    value is rewritten every `refresh` seconds (nothing reads usage as stale; at 10,000 instances
    the default 5 minutes is 33 writes/s, bench/metric_writes_bench.py)."""

    def __init__(self, runtime: Runtime, *, interval: float = 10.0, refresh: float = 300.0,
                 window: float = WINDOW_MS / 1000, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.runtime, self.interval, self.refresh, self.clock = runtime, interval, refresh, clock
        self.wall = wall
        self.window = window
        self._samples: dict[str, tuple[float, Usage]] = {}
        self._windows: dict[str, deque[tuple[float, int | None, int]]] = {}  # (at, cpu, memory)
        self._published: dict[str, Published] = {}
        self._next = 0.0

    def sample(self, running: Iterable[str]) -> None:
        """Read usage of the `running` containers if `interval` has passed; forget the others."""
        now = self.clock()
        running = set(running)
        for name in set(self._samples) - running:
            self._samples.pop(name, None)
            self._windows.pop(name, None)
            self._published.pop(name, None)
        if now < self._next:
            return
        self._next = now + self.interval
        for name in running:
            try:
                usage = self.runtime.stats(name)
            except (CcaError, OSError, ValueError):  # exited between list and stats: next time
                continue
            previous = self._samples.get(name)
            self._samples[name] = (now, usage)
            # A rate needs two samples: memory and processes are published at once, cpu only from
            # the second (a 0 would read as an idle instance: a vertical scale-down, an HPA
            # scale-down's missing sample filled wrong).
            cpu = rate_over = None
            if previous is not None and now > previous[0]:
                spent = usage.cpu_seconds - previous[1].cpu_seconds
                rate_over = now - previous[0]
                cpu = max(0, round(spent / rate_over * 1000))
            window = self._windows.setdefault(name, deque())
            window.append((now, cpu, usage.memory_bytes))
            while window[0][0] <= now - self.window:
                window.popleft()
            cpus = [c for _, c, _ in window if c is not None]
            new = Published(cpu, usage.memory_bytes, usage.pids, p95(cpus) if cpus else None,
                            p95([m for _, _, m in window]), now, self.wall(), rate_over)
            old = self._published.get(name)
            if old is None or now - old.at >= self.refresh or meaningful(old, new):
                self._published[name] = new

    def usage(self, name: str) -> dict[str, int] | None:
        published = self._published.get(name)
        return published.as_doc() if published else None
