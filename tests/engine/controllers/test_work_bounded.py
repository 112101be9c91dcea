"""Issue 12, class 3: every controller's work is proportional to what exists, never to a declared
number it cannot place.

A cluster of three nodes runs a small exposed service beside one that declares N instances no
node can hold. The default controllers run in a loop (with agents starting what is placed) until
a round writes nothing, for N = 5 and N = 150. Measured, not timed: the keys each controller
writes (puts of a new value, deletes of a stored key, as the runner prunes them), the placement
solver's sessions, the network-policy solves. Only the instance and placement controllers write
anything for the unplaceable instances — one document each per instance (the instance documents
are what exists; `instances` is capped by MAX_INSTANCES and the tenant quota) — every other
controller writes the same keys whatever N is, and once settled a round with changed inputs
writes nothing and solves placement in as many sessions for N = 150 as for N = 5 (the solver
sees one unit with a count, not one atom per replica). docs/controllers.md, "What each
controller's work is proportional to".
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from controller_builders import World, node, service

from ccattler.engine.controllers.registry import ControllerConfig, default_controllers
from ccattler.engine.disruption.rebalance import RebalanceOptions
from ccattler.engine.facts.frozen import thaw
from ccattler.engine.facts.snapshot import ChangeSet
from ccattler.engine.placement import run as placement_run
from ccattler.engine.rollout.controller import HISTORY, RolloutController
from ccattler.engine.runner.changes import prune
from ccattler.engine.solve.solver import Session


class _Loop:
    """The default controllers over a dict store, agents starting (ready at once) what is placed."""

    def __init__(self, unplaceable: int) -> None:
        web = service("web", instances=2, expose=[{"port": 80, "protocol": "tcp", "external": False}])
        big = service("big", instances=unplaceable,
                      resources={"cpu": 100_000, "memory": 64 << 20})  # more cpu than any node has
        self.world = World(*(node(f"n{i}", capacity={"cpu": 4000, "memory": 8 << 30}) for i in (1, 2, 3)),
                           web, big)
        self.controllers = default_controllers(ControllerConfig(rebalance=RebalanceOptions(enabled=False)))
        self.now = 1000.0

    def agents(self) -> None:
        values = self.world.values
        for key, doc in list(values.items()):
            if key.startswith("derived/placement/") and doc.get("node"):
                report = f"observed/instance/{key[len('derived/placement/'):]}"
                if report not in values:
                    self.world.put(report, {"node": doc["node"], "state": "running", "ready": True,
                                            "restarts": 0, "spec": None})

    def round(self) -> Counter[str]:
        """One pass of every controller: keys written per controller."""
        self.now += 10
        written: Counter[str] = Counter()
        for controller in self.controllers:
            snapshot = self.world.snapshot()
            changes = prune(controller.reconcile(snapshot, self.now), snapshot, controller.writes).changes
            written[controller.name] += len(changes)
            self.world.apply(changes)
        self.agents()
        return written

    def settle(self, rounds: int = 30) -> Counter[str]:
        """Rounds until one writes nothing: the keys written per controller in all of them."""
        total: Counter[str] = Counter()
        for _ in range(rounds):
            written = self.round()
            if not sum(written.values()):
                return total
            total += written
        raise AssertionError(f"no fixed point: the last round wrote {dict(written)}")

    def controller(self, name: str) -> Any:
        return next(c for c in self.controllers if c.name == name)


@pytest.fixture
def sessions(monkeypatch) -> list[int]:
    """Counts the placement solver's sessions (each one grounds and solves once)."""
    count = [0]

    class Counting(Session):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            count[0] += 1
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(placement_run, "Session", Counting)
    return count


def _measure(unplaceable: int, sessions: list[int]) -> dict[str, Any]:
    loop = _Loop(unplaceable)
    settled = loop.settle()
    values = loop.world.values
    unplaced = [k for k, d in values.items() if k.startswith("derived/placement/default/big-")
                and d.get("node") is None]
    assert len(unplaced) == unplaceable  # each says why, once
    assert len([k for k in values if k.startswith("observed/instance/default/web-")]) == 2
    # settled: inputs placement reads change (a node's report is rewritten, a new heartbeat), and
    # one more round does the work of one reconcile each
    node_key, node_doc = node("n1", capacity={"cpu": 4000, "memory": 8 << 30}, labels={"beat": "1"})
    loop.world.put(node_key, node_doc)
    sizes = {key: len(json.dumps(thaw(doc), sort_keys=True)) for key, doc in values.items()
             if not key.startswith(("derived/instance/", "derived/placement/", "observed/", "desired/"))}
    before, solves = sessions[0], loop.controller("netpolicy").solves
    again = loop.round()
    return {"settled": settled, "again": again, "sessions": sessions[0] - before, "sizes": sizes,
            "netpolicy_solves": loop.controller("netpolicy").solves - solves,
            "placement_rounds": loop.controller("placement").last_plan.rounds}


def test_unplaceable_instances_cost_one_document_each_and_nothing_else(sessions):
    small, large = _measure(5, sessions), _measure(150, sessions)
    grown = {name: large["settled"][name] - small["settled"][name]
             for name in set(small["settled"]) | set(large["settled"])}
    # one instance document and one placement document ("node": null, the reasons) per instance
    assert grown.pop("instance") == 145 and grown.pop("placement") == 145
    assert all(delta == 0 for delta in grown.values()), grown  # nothing else grows with N
    # neither do the documents they write (rollout, endpoints, addresses, names, firewall, …)
    assert large["sizes"] == small["sizes"] and any(k.startswith("derived/firewall/") for k in small["sizes"])
    for run in (small, large):
        assert not +run["again"], run["again"]  # settled: a new round writes nothing
        assert run["netpolicy_solves"] == 0  # nothing the policy logic reads changed
    # the solver sees one unit with a count: as many sessions and rounds for 150 as for 5
    assert large["sessions"] == small["sessions"] <= placement_run.PlanOptions().max_rounds + 1
    assert large["placement_rounds"] == small["placement_rounds"]


def test_a_service_at_the_instance_cap_is_one_unit_for_the_solver(sessions):
    """MAX_INSTANCES-sized services are refused beyond the cap at admission; up to it the solver's
    work per reconcile stays a few sessions (chunks never split a unit)."""
    from ccattler.dsl.limits import MAX_INSTANCES

    loop = _Loop(MAX_INSTANCES)
    loop.round()  # the instance controller creates the documents, placement decides them
    before = sessions[0]
    loop.round()
    assert sessions[0] - before <= placement_run.PlanOptions().max_rounds + 1
    instances = [k for k in loop.world.values if k.startswith("derived/instance/default/big/")]
    assert len(instances) == MAX_INSTANCES


def test_rollout_history_is_capped_whatever_the_number_of_changes():
    """The rollout document keeps the last HISTORY revisions: its size does not grow with history."""
    world = World(service("web", instances=1))
    controller = RolloutController()
    for version in range(3 * HISTORY):
        world.put("desired/service/default/web", service("web", instances=1, image=f"busybox:{version}")[1])
        changes = controller.reconcile(world.snapshot(), 1000.0 + version)
        world.apply(changes if isinstance(changes, ChangeSet) else ChangeSet())
    doc = world.values.get("derived/rollout/default/web") or {}
    assert 0 < len(doc.get("history") or []) <= HISTORY
