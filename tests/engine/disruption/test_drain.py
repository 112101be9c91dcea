"""Drains within each service's budget, stepped through the whole control loop."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from cluster_sim import Sim, service  # noqa: E402

from ccattler.engine.disruption import budget  # noqa: E402
from ccattler.engine.disruption.drain import Member, drain_step  # noqa: E402


def busiest(sim: Sim, name: str) -> str:
    nodes = [n for n, _ in sim.instances(name).values()]
    return max(sorted(set(nodes)), key=nodes.count)


def test_floor_and_allowance_follow_the_budget():
    assert budget.floor({"instances": 3, "disruption": {"min_available": 2}}) == 2
    assert budget.floor({"instances": 3, "disruption": {"max_unavailable": 2}}) == 1
    assert budget.floor({"instances": 3}) == 2  # the update's max_unavailable, default 1
    assert budget.disruptions_allowed({"instances": 3, "disruption": {"min_available": 3}}, 3) == 0


def test_a_drain_at_the_floor_surges_and_says_what_it_waits_for():
    svc = {"instances": 2, "disruption": {"min_available": 2}, "update": {"max_extra": 1}}
    members = [Member("web-a", "n1", True), Member("web-b", "n1", True)]
    step = drain_step("web", svc, members, {"n1"})
    assert step.remove == () and step.extra == 1
    assert step.waits == {"n1": "web floor 2"}
    # the replacement is ready elsewhere: one may go now, and the surge continues for the other
    step = drain_step("web", svc, [*members, Member("web-c", "n2", True)], {"n1"})
    assert step.remove == ("web-a",) and step.extra == 1


def test_unready_drained_instances_go_first_and_cost_nothing():
    svc = {"instances": 2, "disruption": {"min_available": 2}}
    step = drain_step("web", svc, [Member("web-a", "n1", True), Member("web-b", "n1", False)], {"n1"})
    assert step.remove == ("web-b",)


def test_a_drain_waits_for_a_rollout():
    svc = {"instances": 2}
    members = [Member("web-a", "n1", True, "s1"), Member("web-b", "n2", True, "s2")]
    step = drain_step("web", svc, members, {"n1"})
    assert step.document() is None and step.waits == {"n1": "web rollout in progress"}
    running = {"spec": "s2", "counts": {"s1": 1, "s2": 1}}
    one_spec = [Member("web-a", "n1", True, "s2"), Member("web-b", "n2", True, "s2")]
    assert drain_step("web", svc, one_spec, {"n1"}, running).waits == {"n1": "web rollout in progress"}
    assert drain_step("web", svc, one_spec, {"n1"}, {"state": "complete"}).remove == ("web-a",)


def test_drain_of_a_one_instance_service_with_min_available_1_replaces_first():
    sim = Sim({"n1": 4000, "n2": 4000},
              service("web", instances=1, disruption={"min_available": 1, "max_unavailable": None}))
    sim.settle(3)
    (old,) = sim.instances("web")
    source = sim.instances("web")[old][0]
    sim.intent(source, "drain")
    for _ in range(10):
        sim.tick()
        assert sim.ready("web") >= 1, sim.history[-1]
    now = sim.instances("web")
    assert old not in now and len(now) == 1
    assert all(n != source and ready for n, ready in now.values())
    assert sim.condition(source) == "drained"
    assert "derived/drain/" + source in sim.world.values  # drained, stays listed until enable
    assert not any(k.startswith("derived/disruption/") for k in sim.world.values)


def test_drain_never_goes_below_the_floor_and_waits_with_its_reason():
    sim = Sim({"n1": 4000, "n2": 4000, "n3": 4000},
              service("web", instances=4, disruption={"min_available": 3, "max_unavailable": None}))
    sim.settle(3)
    source = busiest(sim, "web")
    on_source = sum(n == source for n, _ in sim.instances("web").values())
    sim.intent(source, "drain")
    sim.tick()
    waits = sim.world.values[f"derived/drain/{source}"]
    assert sim.condition(source) == "draining"
    assert waits["waits"] == ["web floor 3"] or waits["moving"], waits
    for _ in range(14):
        sim.tick()
        assert sim.ready("web") >= 3, sim.history[-1]
        assert len(sim.instances("web")) <= 4 + 1  # instances + max_extra
    assert all(n != source for n, _ in sim.instances("web").values())
    assert sim.ready("web") == 4 and on_source >= 1
    assert sim.condition(source) == "drained"


def test_a_drain_at_zero_budget_without_room_waits_and_says_so():
    sim = Sim({"n1": 1000}, service("web", instances=1, resources={"cpu": 800, "memory": 64 << 20},
                                    disruption={"min_available": 1, "max_unavailable": None}))
    sim.settle(3)
    sim.intent("n1", "drain")
    sim.settle(5)
    assert sim.ready("web") == 1
    assert sim.world.values["derived/drain/n1"]["waits"] == ["web floor 1"]
    assert sim.condition("n1") == "draining"


def test_disabled_nodes_take_no_new_instances_and_keep_theirs():
    sim = Sim({"n1": 4000, "n2": 4000}, service("web", instances=2))
    sim.settle(3)
    before = sim.instances("web")
    sim.intent("n1", "disable")
    sim.tick()
    assert sim.condition("n1") == "disabled"
    sim.world.put(*service("api", instances=3))
    sim.settle(3)
    assert all(n == "n2" for n, _ in sim.instances("api").values())
    assert sim.instances("web") == before  # nothing moved
    sim.intent("n1", None)  # cca enable-node
    sim.tick()
    assert sim.condition("n1") == "ready"


def test_a_stateful_drain_moves_one_ordinal_at_a_time_within_the_budget():
    sim = Sim({"n1": 4000, "n2": 4000},
              service("db", instances=2, stateful=True,
                      disruption={"min_available": 1, "max_unavailable": None}))
    sim.settle(3)
    source = busiest(sim, "db")
    sim.intent(source, "drain")
    for _ in range(10):
        sim.tick()
        assert sim.ready("db") >= 1, sim.history[-1]
    assert set(sim.instances("db")) == {"db-0", "db-1"}
    assert all(n != source for n, _ in sim.instances("db").values())


def test_the_rollout_controllers_settled_states_do_not_hold_a_drain():
    from ccattler.engine.disruption.drain import ROLLOUT_DONE
    from ccattler.engine.rollout.controller import SETTLED

    assert ROLLOUT_DONE == SETTLED


SCALED = {"horizontal": {"min": 1, "max": 20, "targets": [{"metric": "queue", "value": 10, "percent": False}],
                         "events": [], "schedules": [], "stabilization": {"scale_up": 0, "scale_down": 0}},
          "vertical": None}


def _autoscaled_sim(instances: int, to: int, disruption: dict) -> Sim:
    """`web` declared with `instances`, held at `to` by the autoscaler (a pushed queue sample of 10 per
    instance), all placed and ready; n1 holds the most."""
    sim = Sim({"n1": 8000, "n2": 8000, "n3": 8000},
              service("web", instances=instances, scale=SCALED, disruption=disruption,
                      update={"max_unavailable": 1, "max_extra": 1}))

    def push() -> None:
        sim.world.put("observed/metric/default/web/queue/cli",
                      {"value": 10 * to, "time": sim.now, "source": "cli"})
    for _ in range(10):
        push()
        sim.tick()
    assert len(sim.instances("web")) == to and sim.ready("web") == to, sim.instances("web")
    sim.push = push  # type: ignore[attr-defined]
    return sim


def _drain_keeping(sim: Sim, floor: int, ticks: int) -> None:
    """Drain the busiest node: never below `floor` ready, and it ends drained with all back."""
    count = len(sim.instances("web"))
    source = busiest(sim, "web")
    sim.intent(source, "drain")
    for _ in range(ticks):
        sim.push()
        sim.tick()
        assert sim.ready("web") >= floor, sim.history[-1]
    assert sim.condition(source) == "drained" and sim.ready("web") == count


def test_a_drain_keeps_the_floor_of_the_autoscaled_count():
    """instances 4, max_unavailable 1, autoscaled to 9: the floor is 8 (of 9), not 3 (of the user's
    4) — the drain never has more than one instance away."""
    _drain_keeping(_autoscaled_sim(4, 9, {"min_available": None, "max_unavailable": 1}), floor=8, ticks=40)


def test_a_drain_of_an_autoscaled_down_service_is_not_held_by_the_users_count():
    """instances 10, max_unavailable 1, autoscaled down to 3: the floor is 2, so the drain moves
    them; with the user's 10 the floor would be 9 and it would wait forever."""
    _drain_keeping(_autoscaled_sim(10, 3, {"min_available": None, "max_unavailable": 1}), floor=2, ticks=30)
