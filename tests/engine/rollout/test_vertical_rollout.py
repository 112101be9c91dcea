"""Vertical scaling through the rollout controller, the default controllers in a loop
(rollout_sim.Sim, 10 s ticks): running instances use 200m of their 100m cpu request; after the
60 s an increase waits, the autoscaler applies ceil(200 / 0.7) = 286m; the effective spec changes,
so the rollout controller steps a new revision — instances replaced with the new requests within
the update budget (never below 4 − max_unavailable 1 ready, never above 4 + max_extra 1) — and the
revision's cause is the autoscaler (what `cca rollout history` prints in CAUSE)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from rollout_sim import Sim, service  # noqa: E402

from ccattler.engine.autoscale.effective import effective_service  # noqa: E402
from ccattler.engine.controllers.instance import spec_hash  # noqa: E402

VERTICAL = {"horizontal": None, "vertical": {"cpu": {"min": 50, "max": 1000}}}
WEB = service(instances=4, image="app:1", scale=VERTICAL)


class BusySim(Sim):
    """Every running instance reports 200m of cpu in use (its cgroup telemetry)."""

    def agents(self) -> None:
        super().agents()
        for key, doc in list(self.world.values.items()):
            running = key.startswith("observed/instance/") and doc.get("state") == "running"
            if running and not doc.get("usage"):
                self.world.put(key, {**doc, "usage": {"cpu": 200, "memory": 16 << 20}})


def resources(sim: Sim) -> set[int]:
    return {d["resources"]["cpu"] for k, d in sim.world.values.items()
            if k.startswith("derived/instance/default/web/")}


def test_a_vertical_decision_is_rolled_out_within_the_budget():
    sim = BusySim(WEB)
    sim.settle()
    first = spec_hash(WEB[1])
    assert sim.rollout()["revision"] == 1 and resources(sim) == {100}
    sim.history.clear()
    for _ in range(5):  # 50 s of asking for more: the increase still waits (60 s)
        sim.tick()
    scale = sim.world.values["derived/scale/default/web"]
    assert scale.get("requests") is None and scale["pending"]["cpu"]["direction"] == "up", scale
    assert any("waits until" in r for r in scale["vertical_reasons"]), scale
    assert {s for s, _ in sim.instances().values()} == {first}
    sim.tick()  # 60 s: applied
    sim.settle()
    scale = sim.world.values["derived/scale/default/web"]
    assert scale["requests"] == {"cpu": 286} and scale["vertical_event"]["to"]["cpu"] == 286, scale
    second = spec_hash(effective_service(WEB[1], scale))
    assert second != first
    assert {s for s, _ in sim.instances().values()} == {second} and resources(sim) == {286}
    for tick in sim.history:
        assert sum(ready for _, ready in tick.values()) >= 3, tick  # instances 4 − max_unavailable 1
        assert len(tick) <= 5, tick  # instances 4 + max_extra 1
    assert any(len({s for s, _ in tick.values()}) == 2 for tick in sim.history)  # stepped, not at once
    doc = sim.rollout()
    assert doc["state"] == "complete" and doc["revision"] == 2 and doc["previous"] == first
    assert [h.get("cause") for h in doc["history"]] == ["apply", "autoscaler"], doc["history"]
    assert "vertical cpu 100 -> 286" in doc["history"][-1]["why"], doc["history"][-1]
    # steady: usage 200m of 286m is 70 %, so nothing more changes
    for _ in range(10):
        sim.tick()
    assert sim.rollout()["revision"] == 2 and resources(sim) == {286}


def test_a_new_apply_of_other_resources_wins_over_the_autoscaler():
    sim = BusySim(WEB)
    sim.settle()
    for _ in range(12):
        sim.tick()
    assert resources(sim) == {286}
    key, doc = service(instances=4, image="app:1", scale=VERTICAL,
                       resources={"cpu": 400, "memory": 64 << 20})
    sim.world.put(key, doc)
    sim.settle()
    assert resources(sim) == {400}  # the user's new resources at once (a decrease waits 5 min)
    assert sim.rollout()["history"][-1]["cause"] == "apply"


def test_explain_says_what_waits_and_what_was_applied():
    from ccattler.engine.autoscale.explain import scaling_json, scaling_lines

    sim = BusySim(WEB)
    sim.settle()
    sim.tick()
    text = "\n".join(scaling_lines(sim.world.values["derived/scale/default/web"]))
    assert "scaling: vertical only" in text and "vertical cpu: P95 200 → 286 (request 100)" in text, text
    assert "vertical cpu up to 286 waits until" in text, text
    for _ in range(7):
        sim.tick()
    doc = sim.world.values["derived/scale/default/web"]
    text = "\n".join(scaling_lines(doc))
    assert "requests set by the autoscaler: {'cpu': 286}" in text and "last vertical change" in text, text
    assert scaling_json(doc)["requests"] == {"cpu": 286}


def test_cca_events_says_the_requests_changed():
    from types import SimpleNamespace

    from ccattler.engine.api.views import _scaling_reason

    sim = BusySim(WEB)
    sim.settle()
    for _ in range(7):
        sim.tick()
    doc = sim.world.values["derived/scale/default/web"]
    doc = {**doc, "at": doc["vertical_event"]["at"]}  # as written by the decision that applied it
    reason = _scaling_reason(SimpleNamespace(key="derived/scale/default/web", value=doc))
    assert reason.startswith("requests {'cpu': 100, 'memory': 67108864} → {'cpu': 286, "), reason
    assert "vertical cpu 100 -> 286" in reason
