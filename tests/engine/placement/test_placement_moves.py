"""The moves the disruption controller asks for, as placement applies them: a service group's
members asked to move from one node to another go together or not at all (a shared network
namespace must never be split across nodes), and their placements commit as one group."""

from __future__ import annotations

import pytest

from ccattler.engine.placement.controller import changes
from ccattler.engine.placement.model import Cluster, Instance, Node, Service
from ccattler.engine.placement.moves import apply_moves
from ccattler.engine.placement.run import plan


def cluster(target_cpu: int = 4000) -> Cluster:
    nodes = {"n1": Node("n1", 4000, 8192), "n3": Node("n3", target_cpu, 8192)}
    services = {f"t/{m}": Service(f"t/{m}", 500, 64, group="t/g") for m in ("a", "b")}
    services["t/solo"] = Service("t/solo", 500, 64)
    instances = [Instance("t", f"{m}-{i}", f"t/{m}", None, 500, 64, "n1", f"derived/instance/t/{m}/{m}-{i}")
                 for m in ("a", "b") for i in range(2)]
    instances.append(Instance("t", "solo-0", "t/solo", None, 500, 64, "n1", "derived/instance/t/solo/solo-0"))
    return Cluster(nodes, services, instances)


def nodes_of(c: Cluster) -> dict[str, str | None]:
    return {i.name: i.node for i in c.instances}


# (id, target capacity, moves asked, instances expected on n3)
TABLE = [
    ("a whole seat moves", 4000, {"a-0": "n3", "b-0": "n3"}, {"a-0", "b-0"}),
    ("two seats move", 4000, {"a-0": "n3", "b-0": "n3", "a-1": "n3", "b-1": "n3"},
     {"a-0", "b-0", "a-1", "b-1"}),
    ("half a seat stays", 4000, {"a-0": "n3"}, set()),
    ("uneven members stay", 4000, {"a-0": "n3", "a-1": "n3", "b-0": "n3"}, set()),
    ("a seat that does not fit whole stays", 900, {"a-0": "n3", "b-0": "n3"}, set()),
    ("a solo instance fits where the seat does not", 900, {"a-0": "n3", "b-0": "n3", "solo-0": "n3"},
     {"solo-0"}),
]


@pytest.mark.parametrize(("capacity", "asked", "moved"), [t[1:] for t in TABLE], ids=[t[0] for t in TABLE])
def test_group_moves_are_all_or_nothing(capacity: int, asked: dict[str, str], moved: set[str]):
    c = cluster(capacity)
    applied = apply_moves(c, {("t", name): node for name, node in asked.items()})
    assert {n for n, where in nodes_of(c).items() if where == "n3"} == moved
    assert {k.rsplit("/", 1)[1] for k in applied.moved} == moved
    group_moved = moved - {"solo-0"}
    assert [sorted(k.rsplit("/", 1)[1] for k in seat) for seat in applied.together] == (
        [sorted(group_moved)] if group_moved else [])


def test_a_moved_seat_commits_as_one_group_and_placement_keeps_it_together():
    c = cluster()
    applied = apply_moves(c, {("t", "a-0"): "n3", ("t", "b-0"): "n3"})
    result = plan(c)
    assert result.placements == {}  # nothing re-placed: the seat is whole on n3
    changeset = changes(c, result, applied)
    assert changeset.groups == (frozenset({"derived/placement/t/a-0", "derived/placement/t/b-0"}),)
    assert {k: v["node"] for k, v in changeset.puts.items()} == {
        "derived/placement/t/a-0": "n3", "derived/placement/t/b-0": "n3"}
