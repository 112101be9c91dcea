"""Agents' retry delays (engine/api/backoff.py): capped exponential growth, full jitter within it."""

from __future__ import annotations

import random

import pytest

from ccattler.engine.api.backoff import Backoff, start_delay


def test_each_delay_stays_within_its_capped_exponential_ceiling():
    backoff = Backoff(base=0.5, cap=8.0, rng=random.Random(7))
    assert [backoff.ceiling(a) for a in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    for attempt in range(1, 200):
        for _ in range(20):
            assert 0.0 <= backoff.delay(attempt) < backoff.ceiling(attempt) <= 8.0


def test_full_jitter_spreads_over_the_whole_window():
    backoff = Backoff(base=1.0, cap=10.0, rng=random.Random(1))
    delays = [backoff.delay(10) for _ in range(2000)]
    assert min(delays) < 0.5 and max(delays) > 9.5  # not clustered at the ceiling (no fixed pause)


def test_next_counts_attempts_and_reset_starts_over():
    backoff = Backoff(base=1.0, cap=100.0, rng=random.Random(3))
    for _ in range(5):
        backoff.next()
    assert backoff.attempt == 5 and backoff.ceiling(backoff.attempt) == 16.0
    backoff.reset()
    assert backoff.attempt == 0 and backoff.next() < 1.0


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError, match="base"):
        Backoff(base=5.0, cap=1.0)


def test_start_delay_is_within_the_spread():
    rng = random.Random(5)
    assert start_delay(0.0, rng) == 0.0
    assert all(0.0 <= start_delay(3.0, rng) < 3.0 for _ in range(500))
