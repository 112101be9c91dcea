"""Offline settle: controllers run in order to a fixed point over a real SQLite store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
from runner_builders import Copy

from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot
from ccattler.engine.runner import NoFixedPoint, settle
from ccattler.engine.store import open_store


@pytest.fixture
def memory():
    with open_store("sqlite://:memory:") as store:
        yield store


@dataclass
class Chain:
    """Writes `out2/<k>` for each `out/<k>`: only settles after Copy has run."""

    name: ClassVar[str] = "chain"
    reads: ClassVar[tuple[str, ...]] = ("out/", "out2/")
    writes: ClassVar[tuple[str, ...]] = ("out2/",)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        return ChangeSet({f"out2/{k[4:]}": v for k, v in snapshot.under("out/")})


class Counter:
    """Never settles: bumps a counter every time."""

    name: ClassVar[str] = "counter"
    reads: ClassVar[tuple[str, ...]] = ("count",)
    writes: ClassVar[tuple[str, ...]] = ("count",)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        return ChangeSet({"count": {"n": snapshot.get("count", {"n": 0})["n"] + 1}})


def test_settle_reaches_a_fixed_point_and_reports_rounds(memory):
    memory.put("in/a", {"v": 1})
    memory.put("in/b", {"v": 2})
    result = settle(memory, [Chain(), Copy()], now=0.0)
    assert result.rounds == 3  # chain has nothing, copy writes; chain writes; nothing
    assert [f.key for f in memory.range("out2/")[0]] == ["out2/a", "out2/b"]
    again = settle(memory, [Chain(), Copy()], now=0.0)
    assert again.rounds == 1 and again.revision == result.revision


def test_settle_counts_and_drops_writes_outside_the_domain(memory):
    memory.put("in/a", {"v": 1})
    result = settle(memory, [Copy(stray="desired/service/default/evil")], now=0.0)
    assert result.dropped == {"copy": ("desired/service/default/evil",)}
    assert result.stats["copy"].dropped_writes == 2  # once per round
    assert memory.get("desired/service/default/evil") is None


def test_no_fixed_point_is_a_clear_error(memory):
    with pytest.raises(NoFixedPoint, match="did not settle within 4 rounds.*counter"):
        settle(memory, [Counter()], now=0.0, max_rounds=4)


def test_instance_controller_settles_and_a_second_run_changes_nothing(memory):
    memory.put("desired/service/default/web", {"image": "busybox", "instances": 3, "stateful": False,
                                               "resources": {"cpu": 100, "memory": 1}})
    memory.put("desired/service/default/db", {"image": "pg", "instances": 2, "stateful": True,
                                              "resources": {"cpu": 100, "memory": 1}})
    first = settle(memory, [InstanceController()], now=0.0)
    assert first.rounds == 2
    keys = [f.key for f in memory.range("derived/instance/")[0]]
    assert len(keys) == 5 and "derived/instance/default/db/db-1" in keys
    second = settle(memory, [InstanceController()], now=0.0)
    assert second.rounds == 1 and second.revision == first.revision
