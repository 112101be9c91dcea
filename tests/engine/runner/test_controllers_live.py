"""The Python controllers under the live runner on a real store: a node's lease expires → down →
back → ready; instances and addresses converge and a further run changes nothing."""

from __future__ import annotations

import time

from runner_builders import TTL, eventually

from ccattler.engine.controllers.failure import FailureController
from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.controllers.network import NetworkController

NODE = {"capacity": {"cpu": 4000, "memory": 8 << 30}, "labels": {}, "zone": None,
        "architecture": "amd64", "restrictions": [], "address": "192.0.2.1"}


def condition(store, node: str):
    fact = store.get(f"derived/node/{node}")
    return fact and fact.value["condition"]


def test_a_node_whose_lease_expires_is_marked_down_and_ready_when_back(store, runners):
    lease = store.lease_grant(TTL)
    store.put("observed/node/n1", NODE, lease=lease)
    store.put("derived/placement/default/web-bcdfg",
              {"service": "default/web", "instance": "web-bcdfg", "node": "n1", "revision": 1, "score": 0})
    runners(store, [FailureController()])
    assert eventually(lambda: condition(store, "n1") == "ready")
    started = time.monotonic()  # no keepalive from here on: the lease expires by itself
    assert eventually(lambda: condition(store, "n1") == "down", timeout=4 * TTL)
    assert time.monotonic() - started < TTL + 2.0
    store.put("observed/node/n1", NODE, lease=store.lease_grant(TTL * 5))
    assert eventually(lambda: condition(store, "n1") == "ready")


def test_instances_and_addresses_converge_and_then_nothing_changes(store, runners):
    store.put("observed/node/n1", NODE)
    store.put("desired/service/default/web", {"image": "busybox", "instances": 3, "stateful": False,
                                              "resources": {"cpu": 100, "memory": 1}})
    runner = runners(store, [InstanceController(), FailureController(), NetworkController()])
    assert eventually(lambda: len(store.range("derived/instance/")[0]) == 3)
    # Stand-in for the placement controller: place every instance on n1.
    for fact in store.range("derived/instance/")[0]:
        name = fact.value["name"]
        store.put(f"derived/placement/default/{name}",
                  {"service": "default/web", "instance": name, "node": "n1", "revision": 1, "score": 0})
    assert eventually(lambda: len(store.range("derived/network/ip/")[0]) == 3)
    assert runner.wait_idle(10)
    revision = store.revision()
    ops = {name: s.committed_ops for name, s in runner.stats.items()}
    store.put("observed/node/n1", NODE)  # a heartbeat-like rewrite triggers every reader
    assert runner.wait_idle(10)
    time.sleep(0.2)
    assert store.revision() == revision + 1
    assert {name: s.committed_ops for name, s in runner.stats.items()} == ops
    ips = sorted(f.value["ip"] for f in store.range("derived/network/ip/")[0])
    assert ips == ["10.88.0.2", "10.88.0.3", "10.88.0.4"]


def test_a_stateful_scale_down_goes_on_when_the_agent_lets_go(store, runners):
    """Ordered stop under the live runner: the agent's report of db-2 going away (not the periodic
    resync, set far off here) wakes the instance controller to remove db-1."""
    db = {"image": "busybox", "instances": 3, "stateful": True, "resources": {"cpu": 100, "memory": 1}}
    store.put("observed/node/n1", NODE)
    store.put("desired/service/default/db", db)
    runner = runners(store, [InstanceController()], resync_interval=3600)
    assert eventually(lambda: len(store.range("derived/instance/default/db/")[0]) == 3)
    for ordinal in range(3):
        store.put(f"observed/instance/default/db-{ordinal}", {"node": "n1", "state": "running"})
    store.put("desired/service/default/db", {**db, "instances": 1})
    assert eventually(lambda: store.get("derived/instance/default/db/db-2") is None)
    assert runner.wait_idle(10)
    time.sleep(0.3)
    assert store.get("derived/instance/default/db/db-1") is not None  # db-2 is still held by n1
    reconciles = runner.stats["instance"].reconciles
    store.put("observed/instance/default/db-0", {"node": "n1", "state": "failed"})
    assert runner.wait_idle(10)
    time.sleep(0.3)
    assert runner.stats["instance"].reconciles == reconciles  # a report it does not wait on: no run
    store.delete("observed/instance/default/db-2")
    assert eventually(lambda: store.get("derived/instance/default/db/db-1") is None)
    assert store.get("derived/instance/default/db/db-0") is not None
