"""When an agent tries again: capped exponential backoff with full jitter, and a jittered start.

A thousand agents that lost their server at the same moment (or booted together) and retried on a
fixed pause would reach it again together, every time: the server spends the burst on
registrations and initial slices, heartbeats queue behind it, leases expire and the burst repeats
(docs/benchmarks.md, "1,000 idle nodes"). Full jitter (a uniformly random delay in
[0, min(cap, base · 2^attempt))) spreads each retry wave over the whole window, so the server sees
a rate rather than a wall (the "Exponential Backoff And Jitter" analysis of the AWS architecture
blog: full jitter does the least total work of the jitter variants).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delays before retry `attempt` (1 = the first retry): `delay(attempt)` is uniform in
    [0, min(cap, base · 2^(attempt-1))). `next()` counts attempts itself; `reset()` after a
    success. `rng` is injectable for tests."""

    base: float = 0.5
    cap: float = 10.0
    rng: random.Random = field(default_factory=random.Random, repr=False)
    attempt: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.base <= self.cap:
            raise ValueError(f"backoff needs 0 < base <= cap, got base {self.base} and cap {self.cap}")

    def ceiling(self, attempt: int) -> float:
        """The upper bound of `delay(attempt)`."""
        return min(self.cap, self.base * 2.0 ** min(max(attempt, 1) - 1, 60))

    def delay(self, attempt: int) -> float:
        return self.rng.uniform(0.0, self.ceiling(attempt))

    def next(self) -> float:
        self.attempt += 1
        return self.delay(self.attempt)

    def reset(self) -> None:
        self.attempt = 0


def start_delay(spread: float, rng: random.Random | None = None) -> float:
    """A first connection's delay, uniform in [0, spread): agents started together (a cluster
    booting, a host of simulated nodes) do not all register in the same instant."""
    if spread <= 0:
        return 0.0
    return (rng or random).uniform(0.0, spread)
