"""Helpers shared by the chaos tests."""

from __future__ import annotations

import time


def wait_for(predicate, what: str, timeout: float, step: float = 0.05):
    """Poll `predicate` until it returns something truthy; that value, or an AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(step)
