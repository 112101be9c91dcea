"""The rollout controller in a whole control loop (rollout_sim.Sim): a rolling update keeps the floor
and the surge cap at every tick; a crashing spec rolls back after 3 failures and is never retried;
no progress within the deadline rolls back; stateful ordinals update from the top, one at a time;
the document carries the previous spec's fields."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from rollout_sim import Sim, service  # noqa: E402

from ccattler.engine.controllers.instance import spec_hash  # noqa: E402

V1 = service(instances=4, image="app:1")


def apply(sim: Sim, **fields) -> str:
    key, doc = service(**{"instances": 4, **fields})
    sim.world.put(key, doc)
    return spec_hash(doc)


def test_a_rolling_update_keeps_the_floor_and_the_surge_cap():
    sim = Sim(V1)
    sim.settle()
    v1 = spec_hash(V1[1])
    assert sim.rollout()["state"] == "complete" and sim.rollout()["revision"] == 1
    sim.history.clear()
    v2 = apply(sim, image="app:2")
    sim.settle()
    assert {spec for spec, _ in sim.instances().values()} == {v2}
    doc = sim.rollout()
    assert doc["state"] == "complete" and doc["revision"] == 2 and doc["previous"] == v1
    assert doc["history"][-1]["state"] == "complete" and doc["history"][-1]["image"] == "app:2"
    assert len(sim.history) > 3  # it stepped, not replaced all at once
    for tick in sim.history:
        assert sum(ready for _, ready in tick.values()) >= 3, tick  # instances 4 − max_unavailable 1
        assert len(tick) <= 5, tick  # instances 4 + max_extra 1
    assert any(len({s for s, _ in tick.values()}) == 2 for tick in sim.history)


def test_min_available_equal_to_instances_progresses_by_surge_only():
    sim = Sim(service(instances=3, image="app:1", disruption={"min_available": 3, "max_unavailable": None},
                      update={"max_unavailable": 1, "max_extra": 2}))
    sim.settle()
    sim.history.clear()
    apply(sim, instances=3, image="app:2", disruption={"min_available": 3, "max_unavailable": None},
          update={"max_unavailable": 1, "max_extra": 2})
    sim.settle()
    assert sim.rollout()["state"] == "complete"
    for tick in sim.history:
        assert sum(ready for _, ready in tick.values()) >= 3 and len(tick) <= 5, tick


def test_a_crashing_spec_rolls_back_after_three_failures_and_is_not_retried():
    sim = Sim(V1)
    sim.settle()
    v1 = spec_hash(V1[1])
    sim.history.clear()
    bad = apply(sim, image="app:bad")
    sim.settle()
    doc = sim.rollout()
    assert doc["state"] == "rolled back" and doc["build"] == v1 and doc["spec"] == bad
    assert 3 <= doc["failures"] <= 4  # two surge instances crash each tick: 2, then 4
    assert f"{doc['failures']} failures of new instances" in doc["reason"]
    assert "exited with code 1" in doc["reason"]
    assert doc["history"][-1]["state"] == "rolled back" and doc["history"][-1]["reason"] == doc["reason"]
    assert doc["event"]["text"].startswith(f"web: rollout 2 rolled back: {doc['failures']} failures")
    sim.settle(5)
    instances = sim.instances()
    assert len(instances) == 4 and all(spec == v1 and ready for spec, ready in instances.values())
    for tick in sim.history:  # the floor held through the failed rollout and its rollback
        assert sum(ready for _, ready in tick.values()) >= 3, tick
    # Re-applying the same broken spec does not retry it; a new spec starts a new rollout from v1.
    apply(sim, image="app:bad")
    sim.settle(5)
    assert sim.rollout()["state"] == "rolled back" and sim.rollout()["revision"] == 2
    v3 = apply(sim, image="app:3")
    sim.settle()
    doc = sim.rollout()
    assert doc["state"] == "complete" and doc["revision"] == 3 and doc["previous"] == v1
    assert {spec for spec, _ in sim.instances().values()} == {v3}
    assert [h["state"] for h in doc["history"]] == ["complete", "rolled back", "complete"]


def test_no_progress_within_the_deadline_rolls_back():
    stuck = {"update": {"max_unavailable": 0, "max_extra": 0, "deadline": 60_000}}
    sim = Sim(service(instances=2, image="app:1", **stuck))
    sim.settle()
    v1 = spec_hash(sim.world.values["desired/service/default/web"])
    apply(sim, instances=2, image="app:2", **stuck)
    sim.tick()
    doc = sim.rollout()
    assert doc["state"] == "waiting" and doc["waiting"] == "no-budget"
    assert "neither surge nor removal is possible" in doc["reason"]
    for _ in range(6):
        sim.tick()
    doc = sim.rollout()
    assert doc["state"] == "rolled back" and doc["reason"].startswith("no progress for 60s")
    assert {spec for spec, _ in sim.instances().values()} == {v1}


def test_stateful_updates_highest_ordinal_first_one_at_a_time():
    sim = Sim(service(name="db", instances=3, image="db:1", stateful=True))
    sim.settle()
    key, doc = service(name="db", instances=3, image="db:2", stateful=True)
    sim.world.put(key, doc)
    v2 = spec_hash(doc)
    order: list[str] = []
    for _ in range(30):
        sim.tick()
        tick = sim.instances("db")
        order += [n for n, (spec, _) in sorted(tick.items()) if spec == v2 and n not in order]
        assert sum(spec == v2 and not ready for spec, ready in tick.values()) <= 1, tick
        if sim.rollout("db").get("state") == "complete":
            break
    assert order == ["db-2", "db-1", "db-0"]
    assert sim.rollout("db")["state"] == "complete"


def test_the_document_carries_the_previous_specs_fields_while_old_instances_run():
    sim = Sim(service(instances=2, image="app:1", env={"MODE": "old"}))
    sim.settle()
    v1 = spec_hash(sim.world.values["desired/service/default/web"])
    apply(sim, instances=2, image="app:2", env={"MODE": "new"})
    sim.tick()
    doc = sim.rollout()
    assert doc["state"] == "progressing"
    assert doc["fields"][v1]["env"] == {"MODE": "old"} and doc["fields"][v1]["image"] == "app:1"
    sim.settle()
    assert set(sim.rollout()["fields"]) == {sim.rollout()["spec"], v1}  # the previous kept for undo


def test_a_crashing_stateful_update_rolls_back_its_ordinal():
    sim = Sim(service(name="db", instances=3, image="db:1", stateful=True))
    sim.settle()
    v1 = spec_hash(sim.world.values["desired/service/default/db"])
    key, doc = service(name="db", instances=3, image="db:bad", stateful=True)
    sim.world.put(key, doc)
    for _ in range(20):
        sim.tick()
        if sim.rollout("db").get("state") == "rolled back":
            break
    rollout = sim.rollout("db")
    assert rollout["state"] == "rolled back" and "failures of new instances" in rollout["reason"]
    assert rollout["baseline"] == {"db-2": 0}  # only the top ordinal was ever switched
    sim.settle(5)
    assert {spec for spec, _ in sim.instances("db").values()} == {v1}
    assert all(ready for _, ready in sim.instances("db").values())


def test_cca_events_says_each_step_and_why_it_rolled_back():
    from ccattler.engine.api import views
    from ccattler.engine.store import open_store

    sim = Sim(V1)
    sim.settle()
    with open_store("sqlite://:memory:") as store:
        docs = []
        apply(sim, image="app:bad")
        for _ in range(10):
            sim.tick()
            docs.append(dict(sim.rollout()))
        for before, doc in zip([None, *docs], docs, strict=False):
            if doc != before:  # the runner drops a put of the value already stored
                store.put("derived/rollout/default/web", doc)
        reasons = [e["reason"] for e in views.events(store) if e["reason"]]
    assert reasons[0].startswith("web: rollout 2 started (image app:bad); rollout 2 step: 2 new, 3 old")
    assert any(r.startswith("web: rollout 2 step: ") for r in reasons)
    assert reasons[-1].startswith("web: rollout 2 rolled back: ")
    assert "failures of new instances" in reasons[-1]
    assert len(reasons) == len(set(reasons))  # a rewrite that is no event says nothing


def test_a_document_of_another_shape_starts_a_new_revision():
    """The seam's earlier shape ({"spec", "counts"}) or junk: never a crash, a fresh document."""
    sim = Sim(V1)
    sim.settle()
    v1 = spec_hash(V1[1])
    for junk in ({"spec": v1, "counts": {v1: 4}}, {"spec": v1, "state": "complete", "history": "x",
                                                 "fields": [], "revision": "7"}):
        sim.world.put("derived/rollout/default/web", junk)
        sim.tick()
        doc = sim.rollout()
        assert doc["state"] == "complete" and doc["spec"] == v1 and doc["history"][-1]["spec"] == v1
