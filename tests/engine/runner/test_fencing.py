"""A runner whose leadership was taken (the leader key moved on while it still thought it led):
its next commit carries the old fence, the store refuses it, and the runner counts it as fenced
and steps down instead of retrying."""

from __future__ import annotations

from runner_builders import Copy, eventually

from ccattler.engine.facts.keys import LEADER_RUNNER
from ccattler.engine.store.base import Compare


def test_a_commit_after_losing_the_key_is_fenced(store, runners):
    runner = runners(store, [Copy()], leader_ttl=6.0)  # keepalive checks every 2 s: the commit is first
    assert eventually(lambda: runner.is_leader)
    held = store.get(LEADER_RUNNER)
    usurp = [(LEADER_RUNNER, {"identity": "usurper"})]
    ok, _ = store.txn([Compare(LEADER_RUNNER, held.mod_revision)], usurp, ())
    assert ok
    store.put("in/a", {"v": 1})
    assert eventually(lambda: runner.stats["copy"].fenced == 1, timeout=3)
    assert store.get("out/a") is None  # the stale commit was refused whole
    assert not runner.is_leader
