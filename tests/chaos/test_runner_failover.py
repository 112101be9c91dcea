"""Two `cca runner` processes on the 3-member etcd: one leads (`leader/runner`), the other waits.

kill -9 the leader → the other leads within the lease TTL + 2 s, and no desired fact is lost or
duplicated (every acknowledged apply is there, every instance is placed once). SIGSTOP the leader
past its lease, SIGCONT it → the other has taken over, the paused one steps down, and a commit
guarded by its fence is refused by etcd: the store's history shows none of its writes after the
handover."""

from __future__ import annotations

import signal
import time

import pytest

from ccattler.engine.facts.keys import LEADER_RUNNER
from ccattler.engine.store import Compare, open_store
from tests.chaos.util import running, service, wait_for

pytestmark = pytest.mark.chaos

TTL = 2.0


def leader(store) -> str | None:
    fact = store.get(LEADER_RUNNER)
    return fact.value["identity"] if fact else None


def placements(store) -> list[str]:
    return [f.value["instance"] for f in store.range("derived/placement/")[0]]


@pytest.fixture
def two_runners(ha_cluster):
    ha_cluster.server(0)
    runners = {name: ha_cluster.runner(name, TTL) for name in ("runner-a", "runner-b")}
    ha_cluster.wait_serving(ha_cluster.servers[0])
    ha_cluster.join_sim_nodes(2)
    store = open_store(ha_cluster.etcd.url)
    try:
        yield ha_cluster, runners, store
    finally:
        store.close()


def test_kill_the_leading_runner(two_runners):
    cluster, runners, store = two_runners
    first = wait_for(lambda: leader(store), "a leader", 15)
    with cluster.client() as api:
        wait_for(lambda: len(api.get("nodes")["items"]) == 2, "both nodes", 30, 0.2)
        api.apply([service("web", 4)])
        wait_for(lambda: len(running(api, "web")) == 4, "4 running", 30, 0.2)
        desired = {f.key: f.value for f in store.range("desired/")[0]}

        runners[first].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        second = wait_for(lambda: (who := leader(store)) not in (None, first) and who, "a new leader",
                          TTL + 2)
        took = time.monotonic() - killed
        assert took <= TTL + 2, f"failover took {took:.2f}s"
        assert {f.key: f.value for f in store.range("desired/")[0]} == desired  # nothing lost or doubled

        api.apply([service("web", 6)])  # the new leader acts on it
        wait_for(lambda: len(running(api, "web")) == 6, "6 running under the new leader", 30, 0.2)
    names = placements(store)
    assert len(names) == len(set(names)) == 6, names  # every instance placed exactly once
    assert leader(store) == second


def test_a_paused_leader_is_fenced(two_runners):
    cluster, runners, store = two_runners
    first = wait_for(lambda: leader(store), "a leader", 15)
    old_fence = store.get(LEADER_RUNNER).mod_revision
    with cluster.client() as api:
        wait_for(lambda: len(api.get("nodes")["items"]) == 2, "both nodes", 30, 0.2)
        api.apply([service("web", 3)])
        wait_for(lambda: len(running(api, "web")) == 3, "3 running", 30, 0.2)

        runners[first].send_signal(signal.SIGSTOP)
        try:
            second = wait_for(lambda: (who := leader(store)) not in (None, first) and who,
                              "the other runner to take over", TTL + 4)
            new_fence = store.get(LEADER_RUNNER).mod_revision
            api.apply([service("web", 5)])
            wait_for(lambda: len(running(api, "web")) == 5, "5 running under the new leader", 30, 0.2)
            resumed_at = store.revision()
        finally:
            runners[first].send_signal(signal.SIGCONT)
        # A commit carrying the paused leader's fence, as its controllers would send it: refused.
        ok, _ = store.txn([Compare(LEADER_RUNNER, old_fence)], [("derived/placement/default/stale", {})], ())
        assert not ok
        wait_for(lambda: "stepping down" in cluster.procs.log(first), "the resumed runner to step down", 10)
        time.sleep(TTL)  # give it every chance to write
        api.apply([service("web", 4)])
        wait_for(lambda: len(running(api, "web")) == 4, "4 running", 30, 0.2)
    # The history after the handover: the leader key never went back, nothing stale was written.
    watch = store.watch("", from_revision=new_fence)
    events = []
    while (event := watch.get(timeout=1.0)) is not None:
        events.append(event)
        if event.revision >= store.revision():
            break
    watch.cancel()
    assert all(e.key != LEADER_RUNNER for e in events if e.revision > new_fence), "leadership changed again"
    assert not [e for e in events if e.key == "derived/placement/default/stale"]
    assert leader(store) == second
    assert resumed_at < store.revision()
    names = placements(store)
    assert len(names) == len(set(names)) == 4, names
