"""Request-rate limits: a token bucket per caller (`rate` requests/s, bursts of `burst`)."""

from __future__ import annotations

import threading
import time


class RateLimiter:
    """Token buckets keyed by caller; `allow(key)` is False when the caller is over its rate."""

    def __init__(self, rate: float, burst: int, max_keys: int = 10_000) -> None:
        self.rate, self.burst, self.max_keys = rate, burst, max_keys
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> bool:
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if len(self._buckets) >= self.max_keys and key not in self._buckets:
                self._buckets.clear()  # bounded memory: forgetting buckets only forgives callers
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                return False
            self._buckets[key] = (tokens - 1.0, now)
            return True
