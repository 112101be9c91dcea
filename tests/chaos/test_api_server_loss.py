"""Two API servers on one etcd: kill -9 the one the agents use, under load; every agent moves to
the other (the context names both), resumes its slice watch, and the cluster converges — with no
acknowledged apply lost."""

from __future__ import annotations

import signal

import pytest

from ccattler.engine.facts import CcaError
from ccattler.engine.store import open_store
from tests.chaos.util import running, service, wait_for

pytestmark = pytest.mark.chaos

NODES = 6


def node_leases(store) -> dict[str, int]:
    return {f.key: f.lease for f in store.range("observed/node/")[0]}


def test_agents_fail_over_to_the_other_server(ha_cluster):
    store = open_store(ha_cluster.etcd.url)
    first, second = ha_cluster.server(0), ha_cluster.server(1)
    ha_cluster.runner("runner-a")
    for address in ha_cluster.servers:
        ha_cluster.wait_serving(address)
    ha_cluster.join_sim_nodes(NODES)
    with ha_cluster.client() as api:  # both servers, the first preferred
        wait_for(lambda: len([n for n in api.get("nodes")["items"] if n.get("ready", True)]) == NODES,
                 "every node registered", 30, 0.2)
        api.apply([service("web", 12)])
        wait_for(lambda: len(running(api, "web")) == 12, "12 instances running", 30, 0.2)
        leases = node_leases(store)

        first.send_signal(signal.SIGKILL)  # under load: applies keep coming
        first.wait()
        acknowledged = []
        for count in (14, 16, 18):
            def applied(count=count) -> bool:
                try:
                    api.apply([service("web", count)])
                    return True
                except CcaError:  # the channel is moving to the other server
                    return False

            wait_for(applied, f"apply of {count} through the surviving server", 10, 0.1)
            acknowledged.append(count)
        wait_for(lambda: len(running(api, "web")) == 18, "18 instances running after the loss", 30, 0.2)
        # the new instances run on every node, so every agent watches its slice on the second server
        assert {i["node"] for i in running(api, "web")} == {f"sim-{i}" for i in range(1, NODES + 1)}
        nodes = node_leases(store)
        assert set(nodes) == set(leases), "a node was lost"
        assert nodes == leases, "agents registered new leases instead of failing over"
        assert ha_cluster.procs.log("agent").count("slice watch broke") == NODES  # each was on the first
        assert api.get("services", "web")["items"][0]["value"]["instances"] == acknowledged[-1]
    assert second.poll() is None
    store.close()
