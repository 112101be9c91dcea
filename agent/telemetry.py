"""Resource usage of the instances on this node (cpu millicores, memory bytes, process count), read
from the runtime (cgroups for runc) at a modest rate and published inside each instance's observed
document as `usage` — only when it changed meaningfully or has not been refreshed for `refresh`
seconds, so a busy node does not rewrite its documents every tick (the reporter sends only changed
documents)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ccattler.agent.runtime.base import Runtime, Usage
from ccattler.engine.facts import CcaError


@dataclass(frozen=True, slots=True)
class Published:
    """What was last published for one instance, and when."""

    cpu: int | None  # millicores; None until a second sample gives a rate
    memory: int  # bytes
    pids: int
    at: float

    def as_doc(self) -> dict[str, int]:
        doc = {"memory": self.memory, "pids": self.pids}
        if self.cpu is not None:
            doc["cpu"] = self.cpu
        return doc


def meaningful(old: Published, cpu: int | None, memory: int, pids: int) -> bool:
    """A change worth a write: cpu by 50m and 20% (or its first rate), memory by 4 MiB and 10%, or
    any process count."""
    if old.cpu is None or cpu is None:
        cpu_moved = cpu != old.cpu
    else:
        cpu_moved = abs(cpu - old.cpu) >= 50 and abs(cpu - old.cpu) >= 0.2 * max(old.cpu, 1)
    memory_delta = abs(memory - old.memory)
    memory_moved = memory_delta >= 4 << 20 and memory_delta >= 0.1 * max(old.memory, 1)
    return cpu_moved or memory_moved or pids != old.pids


class Telemetry:
    """Samples every `interval` seconds; `usage(name)` is the published value (or None)."""

    def __init__(self, runtime: Runtime, *, interval: float = 10.0, refresh: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runtime, self.interval, self.refresh, self.clock = runtime, interval, refresh, clock
        self._samples: dict[str, tuple[float, Usage]] = {}
        self._published: dict[str, Published] = {}
        self._next = 0.0

    def sample(self, running: Iterable[str]) -> None:
        """Read usage of the `running` containers if `interval` has passed; forget the others."""
        now = self.clock()
        running = set(running)
        for name in set(self._samples) - running:
            self._samples.pop(name, None)
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
            cpu = None
            if previous is not None and now > previous[0]:
                spent = usage.cpu_seconds - previous[1].cpu_seconds
                cpu = max(0, round(spent / (now - previous[0]) * 1000))
            old = self._published.get(name)
            if old is None or now - old.at >= self.refresh or meaningful(old, cpu, usage.memory_bytes,
                                                                         usage.pids):
                self._published[name] = Published(cpu, usage.memory_bytes, usage.pids, now)

    def usage(self, name: str) -> dict[str, int] | None:
        published = self._published.get(name)
        return published.as_doc() if published else None
