"""The rollout arithmetic, table-driven: surge, budget, floor, unready first, waiting, stateful order."""

from __future__ import annotations

import pytest

from ccattler.engine.rollout.step import Member, Policy, policy_of, step


def members(old_ready: int = 0, old_unready: int = 0, new_ready: int = 0,
            new_unready: int = 0) -> list[Member]:
    out = [Member(f"o{i}", "v1", True) for i in range(old_ready)]
    out += [Member(f"u{i}", "v1", False) for i in range(old_unready)]
    out += [Member(f"n{i}", "v2", True) for i in range(new_ready)]
    out += [Member(f"w{i}", "v2", False) for i in range(new_unready)]
    return out


STATELESS = [
    # (what, policy, members, counts, drop, waiting)
    ("surge only: max_unavailable 0 brings one extra up, removes nothing",
     Policy(4, max_extra=1, max_unavailable=0), members(old_ready=4), {"v1": 4, "v2": 1}, (), None),
    ("defaults 1/1: one old goes, two new come (5 at most)",
     Policy(4, floor=3), members(old_ready=4), {"v1": 3, "v2": 2}, ("o0",), None),
    ("budget: max_unavailable 2, max_extra 0 removes two ready old at once",
     Policy(4, max_extra=0, max_unavailable=2), members(old_ready=4), {"v1": 2, "v2": 2}, ("o0", "o1"), None),
    ("floor: disruption.min_available 4 of 4 allows no removal: surge is how it progresses",
     Policy(4, max_extra=1, max_unavailable=1, floor=4), members(old_ready=4), {"v1": 4, "v2": 1}, (), None),
    ("floor above instances - update.max_unavailable wins",
     Policy(4, max_extra=0, max_unavailable=3, floor=3), members(old_ready=4), {"v1": 3, "v2": 1}, ("o0",),
     None),
    ("unready old instances go first, at no cost to the ready count",
     Policy(4, floor=3), members(old_ready=3, old_unready=1), {"v1": 3, "v2": 2}, ("u0",), None),
    ("waits for new instances to be ready (ready 3 = floor 3)",
     Policy(4, floor=3), members(old_ready=3, new_unready=2), {"v1": 3, "v2": 2}, (), "new-unready"),
    ("a ready new instance frees budget for the next old one",
     Policy(4, floor=3), members(old_ready=3, new_ready=1, new_unready=1), {"v1": 2, "v2": 3}, ("o0",), None),
    ("neither surge nor removal: waits and says why",
     Policy(2, max_extra=0, max_unavailable=0, floor=2), members(old_ready=2), {"v1": 2, "v2": 0}, (),
     "no-budget"),
    ("never more than instances + max_extra, even after a scale-down",
     Policy(2, max_extra=1, max_unavailable=0), members(old_ready=2, new_unready=1), {"v1": 2, "v2": 1}, (),
     "new-unready"),
]


@pytest.mark.parametrize(("what", "policy", "have", "counts", "drop", "waiting"), STATELESS,
                         ids=[case[0] for case in STATELESS])
def test_stateless_step(what, policy, have, counts, drop, waiting):
    s = step(policy, "v2", have)
    assert (s.counts, s.drop, s.waiting) == (counts, drop, waiting), what
    assert not s.done
    assert sum(counts.values()) <= policy.instances + policy.max_extra
    ready_after = sum(m.ready for m in have if m.name not in drop)
    assert ready_after >= min(policy.min_ready, sum(m.ready for m in have))  # never below the floor


def test_done_once_every_new_instance_is_ready():
    assert step(Policy(2), "v2", members(new_ready=2)).done
    pending = step(Policy(2), "v2", members(new_ready=1, new_unready=1))
    assert not pending.done and pending.waiting == "new-unready"


def ordinals(*specs_ready: tuple[str, bool]) -> list[Member]:
    return [Member(f"db-{i}", spec, ready, i) for i, (spec, ready) in enumerate(specs_ready)]


STATEFUL = [
    ("highest ordinal first", Policy(3, stateful=True),
     ordinals(("v1", True), ("v1", True), ("v1", True)), {"v1": 2, "v2": 3}, ("db-2",), None),
    ("one at a time: waits for the updated ordinal to be ready", Policy(3, stateful=True),
     ordinals(("v1", True), ("v1", True), ("v2", False)), {"v1": 2, "v2": 3}, (), "new-unready"),
    ("then the next one down", Policy(3, stateful=True),
     ordinals(("v1", True), ("v1", True), ("v2", True)), {"v1": 1, "v2": 3}, ("db-1",), None),
    ("the floor holds: min_available 3 of 3 waits", Policy(3, floor=3, stateful=True),
     ordinals(("v1", True), ("v1", True), ("v1", True)), {"v1": 3, "v2": 3}, (), "no-budget"),
    ("an unready old ordinal costs nothing", Policy(3, floor=3, stateful=True),
     ordinals(("v1", True), ("v1", True), ("v1", False)), {"v1": 2, "v2": 3}, ("db-2",), None),
]


@pytest.mark.parametrize(("what", "policy", "have", "counts", "switched", "waiting"), STATEFUL,
                         ids=[case[0] for case in STATEFUL])
def test_stateful_step(what, policy, have, counts, switched, waiting):
    s = step(policy, "v2", have)
    assert (s.counts, s.switched, s.waiting) == (counts, switched, waiting), what


def test_policy_reads_the_language_defaults_and_the_budget():
    assert policy_of({"instances": 4}, 4) == Policy(4, 1, 1, 3, False, 600_000)
    doc = {"instances": 8, "update": {"max_unavailable": 2, "max_extra": 3, "deadline": 60_000},
           "disruption": {"min_available": 7, "max_unavailable": None}}
    p = policy_of(doc, 8)
    assert (p.max_extra, p.max_unavailable, p.floor, p.deadline_ms, p.min_ready) == (3, 2, 7, 60_000, 7)
    assert policy_of({"instances": 8, "disruption": {"max_unavailable": 4}}, 8).min_ready == 7
