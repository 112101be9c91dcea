"""Group commit: writers that arrive while a batch runs are committed together in the next one."""

from __future__ import annotations

import threading
import time

import pytest

from ccattler.engine.store.group_commit import GroupCommit


def test_a_lone_request_runs_as_a_batch_of_one():
    batches = []
    group = GroupCommit(lambda requests: batches.append(list(requests)) or [r * 2 for r in requests])
    assert group.submit(21) == 42
    assert batches == [[21]]


def test_requests_arriving_during_a_batch_share_the_next_one():
    release = threading.Event()
    batches = []

    def run(requests):
        batches.append(list(requests))
        if requests == [0]:
            release.wait(5)
        return [f"done {r}" for r in requests]

    group = GroupCommit(run)
    results = {}
    first = threading.Thread(target=lambda: results.setdefault(0, group.submit(0)))
    first.start()
    while not batches:
        time.sleep(0.001)
    others = [threading.Thread(target=lambda i=i: results.setdefault(i, group.submit(i))) for i in (1, 2, 3)]
    for thread in others:
        thread.start()
    time.sleep(0.05)  # all three are queued behind the running batch
    release.set()
    for thread in [first, *others]:
        thread.join(5)
    assert results == {i: f"done {i}" for i in range(4)}
    assert batches[0] == [0] and sorted(batches[1]) == [1, 2, 3] and len(batches) == 2


def test_each_request_gets_its_own_outcome_and_a_failed_batch_fails_only_its_requests():
    def run(requests):
        if "boom" in requests:
            raise RuntimeError("batch failed")
        return [ValueError(r) if r == "bad" else r for r in requests]

    group = GroupCommit(run)
    with pytest.raises(ValueError, match="bad"):
        group.submit("bad")
    with pytest.raises(RuntimeError, match="batch failed"):
        group.submit("boom")
    assert group.submit("fine") == "fine"
