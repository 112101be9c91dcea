"""The sim runtime: simulated containers for scale tests and what-if, so one process can host
hundreds of simulated nodes. No threads and no processes: each container is a record whose state
is computed from the clock when asked.

Knob: `SimProfile` (start delay, crash probability and timing, usage as a fraction of the
requested resources, random seed). The clock is injectable, so tests can move time by hand.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from ccattler.agent.runtime.base import (
    ContainerError,
    ContainerNotFound,
    ContainerSpec,
    ContainerStatus,
    ExecResult,
    Runtime,
    State,
    Usage,
)


@dataclass(frozen=True, slots=True)
class SimProfile:
    """How simulated containers behave."""

    start_delay: float = 0.2
    crash_probability: float = 0.0
    crash_after: tuple[float, float] = (1.0, 10.0)
    cpu_fraction: float = 0.3
    memory_fraction: float = 0.5
    seed: int = 0


@dataclass(slots=True)
class _Sim:
    spec: ContainerSpec
    started_at: float | None = None
    crash_at: float | None = None
    stopped_at: float | None = None
    exit_code: int | None = None


class SimRuntime(Runtime):
    """Simulated containers; state is derived from `clock()` on every call."""

    kind = "sim"
    isolated_network = False

    def __init__(self, profile: SimProfile = SimProfile(), clock: Callable[[], float] = time.monotonic):
        self.profile = profile
        self.clock = clock
        self._random = random.Random(profile.seed)
        self._sims: dict[str, _Sim] = {}

    def create(self, spec: ContainerSpec) -> None:
        if spec.name in self._sims:
            raise ContainerError(f"container {spec.name} already exists")
        self._sims[spec.name] = _Sim(spec)

    def start(self, name: str) -> None:
        sim = self._get(name)
        now = self.clock()
        sim.started_at, sim.stopped_at, sim.exit_code, sim.crash_at = now, None, None, None
        if self._random.random() < self.profile.crash_probability:
            low, high = self.profile.crash_after
            sim.crash_at = now + self.profile.start_delay + self._random.uniform(low, high)

    def stop(self, name: str, timeout: float = 5.0) -> None:
        sim = self._get(name)
        if self._state(sim) in ("starting", "running"):
            sim.stopped_at, sim.exit_code = self.clock(), 143

    def remove(self, name: str) -> None:
        self._sims.pop(name, None)

    def list(self) -> list[ContainerStatus]:
        return [self._status(sim) for _, sim in sorted(self._sims.items())]

    def status(self, name: str) -> ContainerStatus | None:
        sim = self._sims.get(name)
        return self._status(sim) if sim else None

    def stats(self, name: str) -> Usage:
        sim = self._get(name)
        if self._state(sim) != "running" or sim.started_at is None:
            raise ContainerError(f"container {name} is not running")
        up = self.clock() - sim.started_at - self.profile.start_delay
        cpu = sim.spec.cpu_millis / 1000 * self.profile.cpu_fraction * max(0.0, up)
        return Usage(cpu_seconds=cpu, memory_bytes=int(sim.spec.memory_bytes * self.profile.memory_fraction))

    def exec(self, name: str, argv: list[str], timeout: float = 30.0) -> ExecResult:
        if self._state(self._get(name)) != "running":
            raise ContainerError(f"container {name} is not running")
        return ExecResult(0, f"sim: {' '.join(argv)}\n".encode(), b"")

    def logs(self, name: str, tail_bytes: int | None = None) -> bytes:
        sim = self._get(name)
        data = f"sim: {sim.spec.name} image {sim.spec.image} state {self._state(sim)}\n".encode()
        return data[-tail_bytes:] if tail_bytes is not None else data

    # -- internals -----------------------------------------------------------------------------
    def _get(self, name: str) -> _Sim:
        try:
            return self._sims[name]
        except KeyError:
            raise ContainerNotFound(f"container {name} does not exist") from None

    def _state(self, sim: _Sim) -> State:
        now = self.clock()
        if sim.started_at is None:
            return "created"
        if sim.stopped_at is not None:
            return "exited"
        if sim.crash_at is not None and now >= sim.crash_at:
            sim.stopped_at, sim.exit_code = sim.crash_at, 1
            return "exited"
        return "starting" if now < sim.started_at + self.profile.start_delay else "running"

    def _status(self, sim: _Sim) -> ContainerStatus:
        state = self._state(sim)
        reason = None
        if state == "exited":
            crashed = sim.exit_code == 1
            reason = "simulated crash (exit code 1)" if crashed else f"exited with code {sim.exit_code}"
        return ContainerStatus(sim.spec.name, state, sim.spec.spec_hash, exit_code=sim.exit_code,
                               reason=reason, started_at=sim.started_at)
