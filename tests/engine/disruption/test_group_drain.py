"""A drain moves a service group's seat (replica i of every member, co-placed) off the draining
node as one unit: the members surge together on one node that fits their summed requests, and
the old seat goes as a whole only when every member's budget allows. First the decision as a
table over hand-built snapshots (`DisruptionController.reconcile`), then whole drains stepped
through the control loop (cluster_sim.py) with every tick checked: a seat is never split and
no member goes below its floor."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cluster_sim import Sim  # noqa: E402
from controller_builders import node, service  # noqa: E402

from ccattler.engine.disruption import budget  # noqa: E402
from ccattler.engine.disruption.controller import DisruptionController, view  # noqa: E402
from ccattler.engine.disruption.drain import drain_step  # noqa: E402
from ccattler.engine.disruption.rebalance import RebalanceOptions  # noqa: E402
from ccattler.engine.facts.snapshot import Snapshot  # noqa: E402

NOW = 10_000.0
CPU = 500  # per member: a seat of a and b needs 1000m
RESOURCES = {"cpu": CPU, "memory": 64 << 20}
AT_FLOOR = {"disruption": {"min_available": 2, "max_unavailable": None}}  # 2 instances: none may go


@dataclass
class Case:
    """Group g (services a, b): seat 0 on the draining n1, seat 1 on n2, n3 empty — unless told
    otherwise; and a solo service `web` with two instances on n1 when `solo`."""

    capacity: dict[str, int] = field(default_factory=lambda: {"n1": 4000, "n2": 4000, "n3": 4000})
    a_fields: dict[str, Any] = field(default_factory=dict)
    b_fields: dict[str, Any] = field(default_factory=dict)
    unready: tuple[str, ...] = ()
    b_specs: tuple[str, str] = ("s1", "s1")  # two specs: b is mid-rollout
    solo: bool = False


def snapshot(case: Case) -> Snapshot:
    values: dict[str, Any] = {}
    for name, cpu in case.capacity.items():
        key, doc = node(name, capacity={"cpu": cpu, "memory": 8 << 30})
        values[key] = doc
    values["derived/node/n1"] = {"condition": "draining", "since": 1}
    placed = {"a": ["n1", "n2"], "b": ["n1", "n2"]}
    for member, extra in (("a", case.a_fields), ("b", case.b_fields)):
        key, doc = service(member, instances=2, group="default/g", resources=RESOURCES, **extra)
        values[key] = doc
    if case.solo:
        key, doc = service("web", instances=2, resources={"cpu": 100, "memory": 64 << 20})
        values[key] = doc
        placed["web"] = ["n1", "n1"]
    for member, nodes in placed.items():
        for i, where in enumerate(nodes):
            name = f"{member}-{i}"
            spec = case.b_specs[i] if member == "b" else "s1"
            values[f"derived/instance/default/{member}/{name}"] = {
                "service": f"default/{member}", "name": name, "ordinal": None, "spec": spec,
                "resources": dict(RESOURCES) if member != "web" else {"cpu": 100, "memory": 64 << 20}}
            values[f"derived/placement/default/{name}"] = {
                "service": f"default/{member}", "instance": name, "node": where}
            values[f"observed/instance/default/{name}"] = {
                "node": where, "state": "running", "ready": name not in case.unready}
    return Snapshot(1, MappingProxyType(values), MappingProxyType(dict.fromkeys(values, 1)))


def decide(case: Case):
    changes = DisruptionController(RebalanceOptions(enabled=False)).reconcile(snapshot(case), NOW)
    docs = {k[len("derived/disruption/"):]: v for k, v in changes.puts.items()
            if k.startswith("derived/disruption/")}
    return docs, changes.puts["derived/drain/n1"], changes.groups


NO_ROOM = {"n1": 4000, "n2": 1500, "n3": 900}  # n2 runs seat 1 (1000m): 500m free; n3 900m

# (id, case, {member: (extra, remove)} it asks for, the code the drain waits with or None)
TABLE = [
    ("seat moves whole", Case(), {"a": (0, ["a-0"]), "b": (0, ["b-0"])}, None),
    ("every member at its floor: the seat surges first", Case(a_fields=AT_FLOOR, b_fields=AT_FLOOR),
     {"a": (1, []), "b": (1, [])}, "member_budget"),
    ("the budget of one member holds the seat", Case(b_fields=AT_FLOOR),
     {"a": (1, []), "b": (1, [])}, "member_budget"),
    ("an unready seat goes at once, at the floor", Case(a_fields=AT_FLOOR, b_fields=AT_FLOOR,
                                                        unready=("a-0", "b-0")),
     {"a": (0, ["a-0"]), "b": (0, ["b-0"])}, None),
    ("a member mid-rollout holds the group", Case(b_specs=("s1", "s2")), {}, "member_rollout"),
    ("no node fits the summed request", Case(capacity=NO_ROOM, a_fields=AT_FLOOR, b_fields=AT_FLOOR),
     {}, "no_target"),
]


@pytest.mark.parametrize(("case", "asks", "waits"), [(c, a, w) for _, c, a, w in TABLE],
                         ids=[i for i, *_ in TABLE])
def test_group_drain_decision(case: Case, asks: dict[str, tuple[int, list[str]]], waits: str | None):
    docs, drain, groups = decide(case)
    assert {full.split("/")[1]: (d["extra"], d["remove"]) for full, d in docs.items()} == asks
    assert all(d["move"] == {} for d in docs.values())
    if len(docs) > 1:  # the members' documents commit together
        assert frozenset(f"derived/disruption/{full}" for full in docs) in groups
    if waits is None:
        assert drain["waits"] == [] and "blocked" not in drain
        assert drain["moving"] == sorted(r for _, removed in asks.values() for r in removed)
        return
    [entry] = drain["blocked"]
    assert entry["group"] == "default/g" and entry["members"] == ["default/a", "default/b"]
    assert entry["code"] == waits and entry["from"] == "n1"
    [text] = drain["waits"]
    assert text.startswith("group default/g: ")
    assert drain["moving"] == []


def test_the_reasons_name_the_member_and_the_combined_need():
    _, drain, _ = decide(Case(b_fields=AT_FLOOR))
    assert drain["blocked"][0]["args"] == {"member": "default/b", "floor": 2, "ready": 2}
    assert drain["waits"] == ["group default/g: budget of member default/b (floor 2, 2 ready)"]
    _, drain, _ = decide(Case(b_specs=("s1", "s2")))
    assert drain["waits"] == ["group default/g: member default/b is being rolled out"]
    _, drain, _ = decide(Case(capacity=NO_ROOM, a_fields=AT_FLOOR, b_fields=AT_FLOOR))
    rejects = {(r["node"], r["code"], tuple(r["args"])) for r in drain["blocked"][0]["args"]["rejects"]}
    assert ("n2", "insufficient_cpu", (1000, 500)) in rejects
    assert ("n3", "insufficient_cpu", (1000, 900)) in rejects
    assert "no target node has room for all its members together" in drain["waits"][0]


def test_non_group_services_still_drain_one_service_at_a_time():
    docs, drain, _ = decide(Case(solo=True))
    svc = service("web", instances=2, resources={"cpu": 100, "memory": 64 << 20})[1]
    members = view(snapshot(Case(solo=True))).members["default/web"]
    step = drain_step("web", svc, members, {"n1"})
    assert docs["default/web"] == step.document()
    assert docs["default/web"]["remove"] == ["web-0"] and docs["default/web"]["extra"] == 1
    assert {"default/a", "default/b"} <= set(docs)  # the group's seat, decided as one
    assert "web-0" in drain["moving"] and "a-0" in drain["moving"]


# --- whole drains through the control loop -------------------------------------------------------

def group_sim(capacity: dict[str, int], instances: int = 3, **b_fields: Any) -> Sim:
    return Sim(capacity,
               service("a", instances=instances, group="default/g", resources=RESOURCES),
               service("b", instances=instances, group="default/g", resources=RESOURCES, **b_fields),
               rebalance=RebalanceOptions(enabled=False))


def check_tick(sim: Sim) -> None:
    """Every node holds as many placed a instances as b ones (no seat split), and no member is
    below its floor (once it was up)."""
    placed = sim.instances()
    per_node = Counter((where, name.split("-")[0]) for name, (where, _) in placed.items() if where)
    for where in {w for w, _ in per_node}:
        assert per_node[where, "a"] == per_node[where, "b"], (where, sim.history[-1])
    for member in ("a", "b"):
        doc = sim.world.values[f"desired/service/default/{member}"]
        assert sim.ready(member) >= budget.floor(doc), (member, sim.history[-1])


def drain(sim: Sim, source: str, ticks: int = 14) -> None:
    sim.intent(source, "drain")
    for _ in range(ticks):
        sim.tick()
        check_tick(sim)


@pytest.mark.parametrize("b_fields", [{}, {"disruption": {"min_available": 3, "max_unavailable": None}}],
                         ids=["default budgets", "b at its floor"])
def test_a_drain_moves_each_seat_whole_and_ends_drained(b_fields: dict[str, Any]):
    sim = group_sim({"n1": 4000, "n2": 4000, "n3": 4000}, **b_fields)
    sim.settle(3)
    source = sim.instances("a")[min(sim.instances("a"))][0]
    drain(sim, source)
    assert sim.condition(source) == "drained"
    assert all(where != source and ready for where, ready in sim.instances().values())
    assert len(sim.instances("a")) == len(sim.instances("b")) == 3
    assert not any(k.startswith("derived/disruption/") for k in sim.world.values)
    assert sim.world.values[f"derived/drain/{source}"]["waits"] == []


def test_a_drain_with_no_room_for_a_whole_seat_waits_with_no_target():
    # each node fits one seat and a half: a seat's surge fits nowhere, though each member would
    sim = group_sim({"n1": 1500, "n2": 1500}, instances=2,
                    disruption={"min_available": 2, "max_unavailable": None})
    sim.settle(3)
    before = sim.instances()
    source = sim.instances("a")[min(sim.instances("a"))][0]
    drain(sim, source, ticks=5)
    assert sim.instances() == before  # nothing surged, nothing removed
    doc = sim.world.values[f"derived/drain/{source}"]
    assert sim.condition(source) == "draining"
    assert [b["code"] for b in doc["blocked"]] == ["no_target"]
    sim.world.put(*node("n3", capacity={"cpu": 4000, "memory": 8 << 30}))  # room arrives
    for _ in range(8):
        sim.tick()
        check_tick(sim)
    assert sim.condition(source) == "drained"
    assert all(where != source for where, _ in sim.instances().values())


def test_a_group_with_a_stateful_member_re_places_its_seat_whole():
    sim = Sim({"n1": 4000, "n2": 4000, "n3": 4000},
              service("a", instances=3, group="default/g", resources=RESOURCES),
              service("b", instances=3, group="default/g", resources=RESOURCES, stateful=True),
              rebalance=RebalanceOptions(enabled=False))
    sim.settle(3)
    source = sim.instances("b")["b-0"][0]
    drain(sim, source, ticks=8)
    assert set(sim.instances("b")) == {"b-0", "b-1", "b-2"}  # same names: re-placed, not replaced
    assert sim.condition(source) == "drained"
    assert all(where != source for where, _ in sim.instances().values())


def test_the_instance_controller_creates_and_removes_a_seats_members_in_one_commit():
    from ccattler.engine.controllers.instance import InstanceController

    base = snapshot(Case(a_fields=AT_FLOOR, b_fields=AT_FLOOR))
    values = dict(base.values)
    for member in ("a", "b"):  # the instances as the instance controller names them
        for key in [k for k in values if k.startswith(f"derived/instance/default/{member}/")]:
            del values[key]
    first = InstanceController().reconcile(Snapshot(1, MappingProxyType(values)), NOW)
    values.update(first.puts)
    surge = {"extra": 1, "remove": [], "move": {}}
    for member in ("a", "b"):
        values[f"derived/disruption/default/{member}"] = surge
    changes = InstanceController().reconcile(Snapshot(2, MappingProxyType(values)), NOW)
    created = {k for k in changes.puts if k not in values}
    assert {k.split("/")[3] for k in created} == {"a", "b"} and len(created) == 2
    assert any(created <= group for group in changes.groups)
    values.update(changes.puts)
    old = sorted(k for k in first.puts if k.startswith("derived/instance/"))
    gone = [next(k for k in old if f"/{m}/" in k) for m in ("a", "b")]
    for key in gone:
        member = key.split("/")[3]
        values[f"derived/disruption/default/{member}"] = {"extra": 0, "remove": [key.rsplit("/", 1)[1]],
                                                          "move": {}}
    changes = InstanceController().reconcile(Snapshot(3, MappingProxyType(values)), NOW)
    assert changes.deletes == frozenset(gone)
    assert any(set(gone) <= group for group in changes.groups)


def test_a_stateful_groups_seat_without_room_waits_with_no_target():
    sim = Sim({"n1": 1500, "n2": 1500},
              service("a", instances=2, group="default/g", resources=RESOURCES),
              service("b", instances=2, group="default/g", resources=RESOURCES, stateful=True),
              rebalance=RebalanceOptions(enabled=False))
    sim.settle(3)
    before = sim.instances()
    source = sim.instances("b")["b-0"][0]
    drain(sim, source, ticks=4)
    assert sim.instances() == before
    doc = sim.world.values[f"derived/drain/{source}"]
    assert [b["code"] for b in doc["blocked"]] == ["no_target"] and doc["moving"] == []
    assert not any(k.startswith("derived/disruption/") for k in sim.world.values)
