"""Rebalancing: a bounded re-solve of the placement program, at most 2 moves a cycle, within
budgets and hard constraints, never an instance moved recently, not during the start-up grace."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from cluster_sim import Sim, service  # noqa: E402
from controller_builders import node  # noqa: E402

from ccattler.engine.disruption.rebalance import RebalanceOptions  # noqa: E402

CPU = {"cpu": 500, "memory": 64 << 20}


def per_node(sim: Sim, name: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n, _ in sim.instances(name).values():
        counts[n] = counts.get(n, 0) + 1
    return counts


def moves_of(sim: Sim) -> list[dict]:
    return (sim.world.values.get("derived/rebalance") or {}).get("moves") or []


def joined(options: RebalanceOptions | None = None, **fields) -> Sim:
    sim = Sim({"n1": 4000, "n2": 4000}, service("web", instances=12, resources=CPU, **fields),
              rebalance=options or RebalanceOptions(grace=0, interval=15, cooldown=300))
    sim.settle(3)
    sim.world.put(*node("n3", capacity={"cpu": 4000, "memory": 8 << 30}))  # a node joins
    return sim


def test_a_joined_node_receives_instances_at_most_two_a_cycle():
    sim = joined()
    seen: set[str] = set()
    cycles = []
    for _ in range(30):
        before = dict(sim.instances("web"))
        sim.tick()
        after = sim.instances("web")
        moved = [i for i in after if i in before and before[i][0] != after[i][0]]
        assert len(moved) <= 2
        assert not seen & set(moved), "an instance moved twice within the cooldown"
        seen |= set(moved)
        if moved:
            cycles.append(moved)
        assert sim.ready("web") >= 11  # the budget: max_unavailable 1
    assert per_node(sim, "web").get("n3", 0) >= 3, per_node(sim, "web")
    assert len(cycles) >= 2
    record = sim.world.values["derived/rebalance"]
    assert record["moves"] and all("% cpu →" in m["gain"] for m in record["moves"]), record
    assert record["moves"][0]["to"] == "n3"


def test_hard_constraints_hold_a_required_label_keeps_them_put():
    sim = Sim({"n1": 4000, "n2": 4000}, service("web", instances=12, resources=CPU))
    for name in ("n1", "n2"):
        sim.world.put(*node(name, capacity={"cpu": 4000, "memory": 8 << 30}, labels={"disk": "ssd"}))
    sim.world.put(*service("web", instances=12, resources=CPU,
                           placement={"require": [{"key": "disk", "value": "ssd"}], "prefer": [],
                                      "accept": [], "zone": None, "zone_spread": False,
                                      "architecture": None, "colocate": [], "separate": []}))
    sim.settle(3)
    sim.world.put(*node("n3", capacity={"cpu": 4000, "memory": 8 << 30}))  # no ssd
    sim.settle(10)
    assert "n3" not in per_node(sim, "web")


def test_no_move_within_the_start_up_grace():
    sim = joined(RebalanceOptions(grace=600, interval=0))
    sim.settle(10)  # 100 s: inside the grace period
    assert "n3" not in per_node(sim, "web") and not moves_of(sim)


def test_a_service_at_its_floor_is_not_moved():
    sim = joined(disruption={"min_available": 12, "max_unavailable": None})
    sim.settle(10)
    assert "n3" not in per_node(sim, "web")


def test_even_nodes_are_left_alone():
    sim = Sim({"n1": 4000, "n2": 4000}, service("web", instances=4, resources=CPU),
              rebalance=RebalanceOptions(grace=0, interval=0))
    sim.settle(10)
    assert not moves_of(sim)


def test_a_larger_budget_still_moves_at_most_two_a_cycle():
    sim = joined(disruption={"min_available": None, "max_unavailable": 6})
    largest = 0
    for _ in range(20):
        before = dict(sim.instances("web"))
        sim.tick()
        after = sim.instances("web")
        largest = max(largest, sum(1 for i in after if i in before and before[i][0] != after[i][0]))
    assert largest == 2
    assert per_node(sim, "web") == {"n1": 4, "n2": 4, "n3": 4}


def test_explain_names_each_move_and_its_gain():
    from ccattler.engine.api.planning import explain_live
    from ccattler.engine.store import open_store

    sim = joined()
    while not moves_of(sim):
        sim.tick()
    with open_store("sqlite://:memory:") as store:
        for key, value in sim.world.values.items():
            store.put(key, value)
        answer = explain_live(store, "web")
    moved = answer["explanation"]["rebalancing"]
    assert moved["moves"] and all(m["to"] == "n3" and "% cpu →" in m["gain"] for m in moved["moves"])
    text = "\n".join(answer["lines"])
    assert "rebalancing: moved at" in text
    first = moved["moves"][0]
    assert f"{first['instance']}: {first['from']} → n3 ({first['gain']})" in text


def seats_by_node(sim: Sim) -> dict[str, tuple[int, int]]:
    """node → (instances of a, instances of b) placed there."""
    a, b = per_node(sim, "a"), per_node(sim, "b")
    return {n: (a.get(n, 0), b.get(n, 0)) for n in sorted(set(a) | set(b)) if n is not None}


def test_a_group_moves_seat_by_seat_to_a_joined_node_never_split():
    """A `share network` group's members run in one namespace: every tick, each node holds as many
    of a's instances as of b's (never half a seat), both keep their floor, and n3 receives seats."""
    members = [service(m, instances=6, resources=CPU, group="default/g") for m in ("a", "b")]
    group = ("desired/group/default/g", {"kind": "group", "tenant": "default", "name": "g",
                                          "type": "service", "services": ["default/a", "default/b"],
                                          "share_network": True, "share_volumes": []})
    sim = Sim({"n1": 4000, "n2": 4000}, *members, group,
              rebalance=RebalanceOptions(grace=0, interval=15, cooldown=300))
    sim.settle(3)
    sim.world.put(*node("n3", capacity={"cpu": 4000, "memory": 8 << 30}))
    group_moves = []
    for _ in range(30):
        sim.tick()
        for where, (a, b) in seats_by_node(sim).items():
            assert a == b, f"group split on {where}: {seats_by_node(sim)}"
        assert sim.ready("a") >= 5 and sim.ready("b") >= 5
        group_moves += [m for m in moves_of(sim) if m not in group_moves]
    assert seats_by_node(sim) == {"n1": (2, 2), "n2": (2, 2), "n3": (2, 2)}
    assert group_moves and all(m["group"] == "default/g" and m["to"] == "n3" for m in group_moves)
    assert all({x["service"] for x in m["members"]} == {"default/a", "default/b"} for m in group_moves)
