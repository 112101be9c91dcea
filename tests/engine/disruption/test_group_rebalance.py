"""Rebalancing of service groups, the decision as a table: a group's seats (replica i of every
member, co-placed) move as one unit — only when the combined gain is worth it, every member fits
the target together and every member's budget allows its instance to go — and otherwise the
record says why. `rebalance()` is called on hand-built snapshots; the whole loop is in
test_rebalance.py."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from controller_builders import node, service  # noqa: E402

from ccattler.engine.disruption.controller import view  # noqa: E402
from ccattler.engine.disruption.explain import moves_lines, moves_of  # noqa: E402
from ccattler.engine.disruption.rebalance import RebalanceOptions, rebalance  # noqa: E402
from ccattler.engine.facts.snapshot import Snapshot  # noqa: E402

NOW = 10_000.0
OPTIONS = RebalanceOptions(grace=0, interval=0, cooldown=300)
SEAT_CPU = 500  # per member: a seat of a and b needs 1000m


@dataclass
class Case:
    """Three seats of group g (services a, b) on n1 and one on n2, unless told otherwise."""

    seats: dict[str, int] = field(default_factory=lambda: {"n1": 3, "n2": 1})
    capacity: dict[str, int] = field(default_factory=lambda: {"n1": 4000, "n2": 4000, "n3": 4000})
    b_fields: dict[str, Any] = field(default_factory=dict)  # the b service's document overrides
    unready: tuple[str, ...] = ()  # instance names not ready
    recent: tuple[str, ...] = ()  # instance names moved within the cooldown
    split: bool = False  # b's instance of the first seat on n2 instead of n1
    b_specs: tuple[str, ...] = ()  # specs of b's instances (two specs: a rollout)


def snapshot(case: Case) -> Snapshot:
    values: dict[str, Any] = {}
    for name, cpu in case.capacity.items():
        key, doc = node(name, capacity={"cpu": cpu, "memory": 8 << 30})
        values[key] = doc
    count = sum(case.seats.values())
    for member in ("a", "b"):
        fields = {"instances": count, "group": "default/g",
                  "resources": {"cpu": SEAT_CPU, "memory": 64 << 20}}
        if member == "b":
            fields.update(case.b_fields)
        key, doc = service(member, **fields)
        values[key] = doc
    nodes = [n for n, k in sorted(case.seats.items()) for _ in range(k)]
    for member in ("a", "b"):
        for i, where in enumerate(nodes):
            name = f"{member}-{i}"
            if case.split and member == "b" and i == 0:
                where = "n2"
            spec = case.b_specs[i] if member == "b" and case.b_specs else "s1"
            values[f"derived/instance/default/{member}/{name}"] = {
                "service": f"default/{member}", "name": name, "ordinal": None, "spec": spec,
                "resources": {"cpu": SEAT_CPU, "memory": 64 << 20}}
            values[f"derived/placement/default/{name}"] = {
                "service": f"default/{member}", "instance": name, "node": where}
            values[f"observed/instance/default/{name}"] = {
                "node": where, "state": "running", "ready": name not in case.unready}
    if case.recent:
        values["derived/rebalance"] = {"at": NOW - 1000, "moves": [],
                                       "recent": {f"default/{n}": NOW - 10 for n in case.recent}}
    return Snapshot(1, MappingProxyType(values), MappingProxyType(dict.fromkeys(values, 1)))


def decide(case: Case):
    snap = snapshot(case)
    return rebalance(snap, view(snap), {}, NOW, 0.0, OPTIONS)[:2]


# (case id, the case, the code of why g cannot move or None when a seat moves)
TABLE = [
    ("moves", Case(), None),
    ("budget of a member", Case(b_fields={"disruption": {"min_available": 4, "max_unavailable": None}}),
     "member_budget"),
    ("a member mid-rollout", Case(b_specs=("s1", "s1", "s2", "s1")), "member_rollout"),
    ("a member not ready in every seat",
     Case(unready=("b-0", "b-1", "b-2"),
          b_fields={"disruption": {"min_available": 0, "max_unavailable": None}}),
     "member_not_ready"),
    ("not ready, and at its floor", Case(unready=("b-0", "b-1", "b-2")), "member_budget"),
    ("moved recently", Case(recent=("a-0", "a-1", "a-2")), "moved_recently"),
    ("capacity on the targets", Case(capacity={"n1": 4000, "n2": 900, "n3": 900}, seats={"n1": 3}),
     "no_target"),
    ("not worth it", Case(seats={"n1": 2, "n2": 1}, capacity={"n1": 4000, "n2": 4000}), "not_worth_it"),
]


@pytest.mark.parametrize(("case", "blocked"), [(c, b) for _, c, b in TABLE], ids=[i for i, _, _ in TABLE])
def test_group_move_decision(case: Case, blocked: str | None):
    targets, record = decide(case)
    if blocked is None:
        assert record is not None and record["blocked"] == []
        [move] = record["moves"]
        assert move["group"] == "default/g" and move["from"] == "n1" and move["to"] == "n3"
        seat = move["members"][0]["instance"].rsplit("-", 1)[1]  # a-i and b-i: one seat
        assert move["members"] == [{"service": "default/a", "instance": f"default/a-{seat}"},
                                   {"service": "default/b", "instance": f"default/b-{seat}"}]
        assert targets == {"default/a": {f"a-{seat}": "n3"}, "default/b": {f"b-{seat}": "n3"}}
        assert "n1 75 % cpu → 50 %" in move["gain"] and "n3 0 % → 25 %" in move["gain"]
        return
    assert targets == {}, "a blocked group moves nothing"
    assert record is not None and not record.get("moves")
    [entry] = record["blocked"]
    assert entry["group"] == "default/g" and entry["code"] == blocked and entry["from"] == "n1"
    assert entry["members"] == ["default/a", "default/b"]


def test_a_split_seat_does_not_move_but_whole_ones_do():
    """b-0 on n2: on n1 a-0, a-1 pair with b-1, b-2 (seats pair node by node), a-2 has no partner
    there — the left-over seat (a-2 on n1, b-3 on n2) is split and stays; a whole one moves."""
    targets, record = decide(Case(split=True))
    [move] = record["moves"]
    moved = {m["instance"] for m in move["members"]}
    assert moved in ({"default/a-0", "default/b-1"}, {"default/a-1", "default/b-2"})
    assert set(targets) == {"default/a", "default/b"}


def test_the_group_budget_is_the_least_of_its_members():
    """b may lose 1 (the update's default), a 3: one seat moves, though the cap is 2."""
    _, record = decide(Case(seats={"n1": 4}, capacity={"n1": 4000, "n2": 4000, "n3": 4000}))
    assert len(record["moves"]) == 1
    _, record = decide(Case(seats={"n1": 4}, capacity={"n1": 4000, "n2": 4000, "n3": 4000},
                            b_fields={"disruption": {"min_available": None, "max_unavailable": 2}}))
    assert len(record["moves"]) == 1  # a's budget (update max_unavailable 1) holds it to one


def test_capacity_reason_names_the_combined_need():
    _, record = decide(Case(capacity={"n1": 4000, "n2": 900, "n3": 900}, seats={"n1": 3}))
    [entry] = record["blocked"]
    assert {(r["node"], r["code"], tuple(r["args"])) for r in entry["args"]["rejects"]} == {
        ("n2", "insufficient_cpu", (1000, 900)), ("n3", "insufficient_cpu", (1000, 900))}


@pytest.mark.parametrize(("case", "text"), [
    (Case(b_fields={"disruption": {"min_available": 4, "max_unavailable": None}}),
     "group default/g cannot move off n1: budget of member default/b (floor 4, 4 ready)"),
    (Case(capacity={"n1": 4000, "n2": 900, "n3": 900}, seats={"n1": 3}),
     "no target node has room for all its members together: n2 insufficient cpu (need 1000m, free 900m)"),
    (Case(seats={"n1": 2, "n2": 1}, capacity={"n1": 4000, "n2": 4000}),
     "room on n2, but the combined gain does not outweigh restarting every member"),
])
def test_explain_says_why_a_group_cannot_move(case: Case, text: str):
    _, record = decide(case)
    for member in ("default/a", "default/b"):
        section = moves_of(record, member)
        assert section is not None and section["blocked"]
        assert any(text in line for line in moves_lines(section)), moves_lines(section)


def test_explain_names_a_group_move_with_members_from_to_and_gain():
    _, record = decide(Case())
    section = moves_of(record, "default/b")
    [move] = section["moves"]
    lines = moves_lines(section)
    members = ", ".join(m["instance"] for m in move["members"])
    assert f"    group default/g ({members}): n1 → n3 ({move['gain']})" in lines
    assert moves_of(record, "default/other") is None


def test_loads_are_weighed_at_most_once_an_interval():
    """Weighing builds the whole cluster model: a cycle within `interval` of the last weighing
    moves nothing and weighs nothing; one an interval later weighs again and moves."""
    snap = snapshot(Case())
    v = view(snap)
    options = RebalanceOptions(grace=0, interval=60, cooldown=300)
    targets, record, weighed = rebalance(snap, v, {}, NOW, 0.0, options, NOW - 30)
    assert (targets, weighed) == ({}, False) and record is None
    targets, record, weighed = rebalance(snap, v, {}, NOW, 0.0, options, NOW - 60)
    assert weighed and targets and record["moves"]
