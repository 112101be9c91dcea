"""Placement controller tests over fact dicts built with the document builders."""

from collections import Counter
from typing import Any

from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.facts.frozen import freeze
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.placement.builders import GI, node, service
from ccattler.engine.placement.controller import PlacementController
from ccattler.engine.placement.model import Cluster


class World:
    """A fact dict driven by the instance and placement controllers, like `settle` does."""

    def __init__(self, *facts: tuple[str, Any]) -> None:
        self.values: dict[str, Any] = {k: freeze(v) for k, v in facts}  # as the runner hands them out
        self.revision = 1
        self.placement = PlacementController()

    def snapshot(self) -> Snapshot:
        return Snapshot(self.revision, dict(self.values))

    def apply(self, changes) -> None:
        self.values.update((k, freeze(v)) for k, v in changes.puts.items())
        for key in changes.deletes:
            self.values.pop(key, None)
        self.revision += 1

    def run(self) -> Any:
        self.apply(InstanceController().reconcile(self.snapshot(), 0.0))
        changes = self.placement.reconcile(self.snapshot(), 0.0)
        self.apply(changes)
        return changes

    def placements(self) -> dict[str, str | None]:
        return {v["instance"]: v["node"] for k, v in self.values.items()
                if k.startswith("derived/placement/")}

    def nodes_of(self, service_name: str) -> list[str | None]:
        return sorted((v["node"] or "") for v in self.values.values()
                      if isinstance(v, dict) and v.get("instance") and v.get("service") == service_name)

    def unplaced(self) -> dict[str, list[dict]]:
        return {v["instance"]: v["reasons"] for k, v in self.values.items()
                if k.startswith("derived/placement/") and v["node"] is None}



def world(*facts):
    return World(*facts)

def sim_cluster():
    return [
        node("n1", 8, 32 * GI, "a", {"disk": "ssd"}),
        node("n2", 8, 32 * GI, "a"),
        node("n3", 16, 64 * GI, "b", {"disk": "ssd"}),
        node("n4", 16, 64 * GI, "b", {"gpu": "true"}, restrict=["gpu"]),
        node("n5", 8, 32 * GI, "c", {"disk": "ssd"}, restrict=["dedicated"]),
        node("n6", 8, 32 * GI, "c"),
    ]


def zones_of(world, svc):
    zone = {"n1": "a", "n2": "a", "n3": "b", "n4": "b", "n5": "c", "n6": "c"}
    return Counter(zone[n] for n in world.nodes_of(svc))


def test_sim_cluster_places_everything_and_is_stable():
    w = world(*sim_cluster(),
              service("web", 6, zone_spread=True, prefer=[{"key": "disk", "value": "ssd", "weight": 1}]),
              service("trainer", 1, 4, 16 * GI, require=[{"key": "gpu", "value": "true"}], accept=["gpu"]),
              service("cache", 2, 0.5, 2 * GI, separate=["default/web"]))
    w.run()
    assert w.unplaced() == {}
    assert zones_of(w, "default/web") == {"a": 2, "b": 2, "c": 2}
    assert w.nodes_of("default/trainer") == ["n4"]
    web_nodes = set(w.nodes_of("default/web"))
    assert not set(w.nodes_of("default/cache")) & web_nodes
    assert not w.run()  # a second reconcile changes nothing


def test_required_label_nowhere_stays_unplaced_with_reasons():
    w = world(*sim_cluster(), service("ml", 2, require=[{"key": "tpu", "value": "v4"}]))
    w.run()
    unplaced = w.unplaced()
    assert len(unplaced) == 2
    reasons = next(iter(unplaced.values()))
    assert {"code": "missing_label", "args": ["tpu", "v4"], "nodes": 6} in reasons
    assert not w.run()


def test_capacity_is_real_fit():
    w = world(node("small", 2, 4 * GI), service("big", 3, cpu=1, memory=1 * GI))
    w.run()
    assert w.nodes_of("default/big") == ["", "small", "small"]
    (reasons,) = set(map(repr, w.unplaced().values()))
    assert "insufficient_cpu" in reasons and "[1000, 0]" in reasons


def test_memory_in_mib_does_not_overflow():
    w = world(node("huge", 64, 512 * GI), service("db", 2, cpu=1, memory=200 * GI))
    w.run()
    assert w.nodes_of("default/db") == ["huge", "huge"]


def test_down_node_loses_its_instances():
    w = world(node("a1", zone="a"), node("a2", zone="a"), service("web", 2))
    w.run()
    first = w.placements()
    victim = next(iter(first.values()))
    w.values[f"derived/node/{victim}"] = {"condition": "down", "since": 3}
    w.run()
    assert set(w.placements().values()) == {n for n in ("a1", "a2") if n != victim}
    assert not w.run()


def test_group_members_land_together():
    w = world(node("x"), node("y"), node("z"),
              service("app", 2, group="default/pair"), service("sidecar", 2, cpu=0.5, group="default/pair"))
    w.run()
    assert w.unplaced() == {}
    apps, cars = w.nodes_of("default/app"), w.nodes_of("default/sidecar")
    assert apps == cars


def test_growing_a_group_keeps_its_running_seats_where_they_are():
    """New instances' names sort anywhere among the old ones: seats pair node by node, so a
    scale-up places only the new seats and never re-pairs (and re-places) running ones."""
    w = world(node("x"), node("y"), node("z"),
              service("app", 3, group="default/pair"), service("sidecar", 3, cpu=0.5, group="default/pair"))
    w.run()
    for count in (4, 5, 6):
        before = w.placements()
        w.values.update(dict([service("app", count, group="default/pair"),
                              service("sidecar", count, cpu=0.5, group="default/pair")]))
        w.run()
        after = w.placements()
        assert {i: n for i, n in after.items() if i in before} == before, count
        assert w.unplaced() == {}
        assert sorted(w.nodes_of("default/app")) == sorted(w.nodes_of("default/sidecar"))


def test_same_snapshot_same_plan():
    def build():
        w = world(*sim_cluster(), service("web", 9, zone_spread=True), service("api", 5, cpu=2))
        w.run()
        return w.placements()
    assert build() == build()


def test_malformed_documents_are_skipped_not_fatal():
    w = world(node("ok"), service("web", 2),
              ("observed/node/broken", {"capacity": {"cpu": "lots"}}),
              ("observed/node/huge", {"capacity": {"cpu": 10**12, "memory": 1}}),
              ("desired/service/default/bad", {"tenant": "default"}))
    w.run()
    assert w.nodes_of("default/web") == ["ok", "ok"]
    skipped = Cluster.from_snapshot(w.snapshot()).skipped
    assert set(skipped) == {"observed/node/broken", "observed/node/huge", "desired/service/default/bad"}


def test_document_cache_reuses_unchanged_documents_only():
    from ccattler.engine.placement.model import DocumentCache

    w = world(node("a"), service("web", 2))
    w.run()
    cache = DocumentCache()
    first = Cluster.from_snapshot(w.snapshot(), cache)
    again = Cluster.from_snapshot(w.snapshot(), cache)
    assert again.services["default/web"] is first.services["default/web"]
    changed = dict(w.values["desired/service/default/web"], resources={"cpu": 3000, "memory": 1024**3})
    w.values["desired/service/default/web"] = changed
    third = Cluster.from_snapshot(w.snapshot(), cache)
    assert third.services["default/web"].cpu == 3000
    assert [i.node for i in third.instances] == ["a", "a"]
