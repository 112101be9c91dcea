"""The endpoint controller: only ready, running, addressed instances on their placed node count."""

from __future__ import annotations

from ccattler.engine.controllers.endpoint import EndpointController
from ccattler.engine.facts.snapshot import Snapshot


def _snapshot(extra=None):
    values = {
        "desired/service/default/web": {"expose": [{"port": 80, "protocol": "http"}, {"port": 53}]},
        "derived/placement/default/web-a": {"service": "default/web", "instance": "web-a", "node": "n1"},
        "derived/placement/default/web-b": {"service": "default/web", "instance": "web-b", "node": "n2"},
        "derived/placement/default/web-c": {"service": "default/web", "instance": "web-c", "node": "n1"},
        "derived/placement/default/web-d": {"service": "default/web", "instance": "web-d", "node": None},
        "derived/placement/default/web-e": {"service": "default/web", "instance": "web-e", "node": "n1"},
        "observed/instance/default/web-a": {"node": "n1", "state": "running",
                                            "ready": True, "ip": "10.0.0.2"},
        "observed/instance/default/web-b": {"node": "n2", "state": "running",
                                            "ready": False, "ip": "10.0.1.2"},
        "observed/instance/default/web-c": {"node": "n9", "state": "running",
                                            "ready": True, "ip": "10.0.9.2"},
        "observed/instance/default/web-e": {"node": "n1", "state": "starting", "ready": False, "ip": None},
    }
    values.update(extra or {})
    return Snapshot(1, values)


def test_ready_instances_become_endpoints():
    changes = EndpointController().reconcile(_snapshot(), 0.0)
    assert changes.puts == {"derived/endpoint/default/web": {
        "service": "default/web",
        "ports": [{"port": 53, "protocol": "tcp"}, {"port": 80, "protocol": "http"}],
        "endpoints": [{"instance": "web-a", "node": "n1", "ip": "10.0.0.2"}]}}


def test_unchanged_documents_are_not_rewritten_and_gone_services_are_deleted():
    first = EndpointController().reconcile(_snapshot(), 0.0)
    again = EndpointController().reconcile(_snapshot({**first.puts, "derived/endpoint/default/old": {}}), 0.0)
    assert not again.puts and again.deletes == {"derived/endpoint/default/old"}


def test_readiness_change_updates_the_document():
    ready_b = {"observed/instance/default/web-b": {"node": "n2", "state": "running",
                                            "ready": True,
                                                   "ip": "10.0.1.2"}}
    doc = EndpointController().reconcile(_snapshot(ready_b), 0.0).puts["derived/endpoint/default/web"]
    assert [e["instance"] for e in doc["endpoints"]] == ["web-a", "web-b"]


def test_incremental_runs_match_a_fresh_full_pass_over_random_histories():
    import random

    rng = random.Random(7)
    controller = EndpointController()
    values: dict = {}
    instances = [f"default/i{n}" for n in range(12)]
    for _ in range(300):
        for _ in range(rng.randint(1, 4)):  # a few writes, as the runner's cache would apply them
            what = rng.random()
            inst = rng.choice(instances)
            service = f"default/s{rng.randint(0, 2)}"
            if what < 0.3:
                node = rng.choice(["n1", "n2", None])
                values[f"derived/placement/{inst}"] = {"service": service, "node": node}
            elif what < 0.6:
                values[f"observed/instance/{inst}"] = {"node": rng.choice(["n1", "n2"]), "ip": "10.0.0.1",
                                                       "state": rng.choice(["running", "starting"]),
                                                       "ready": rng.random() < 0.7}
            elif what < 0.75:
                values.pop(rng.choice([f"derived/placement/{inst}", f"observed/instance/{inst}"]), None)
            elif what < 0.9:
                values[f"desired/service/{service}"] = {"expose": [{"port": rng.choice([80, 81])}]}
            else:
                values.pop(f"desired/service/{service}", None)
        snapshot = Snapshot(1, dict(values))
        incremental = controller.reconcile(snapshot, 0.0)
        full = EndpointController().reconcile(snapshot, 0.0)
        assert (dict(incremental.puts), incremental.deletes) == (dict(full.puts), full.deletes)
        if rng.random() < 0.9:  # the commit lands (sometimes it does not: a conflict)
            values.update(incremental.puts)
            for key in incremental.deletes:
                values.pop(key, None)


def test_only_reports_that_change_what_makes_an_endpoint_wake_the_controller():
    controller = EndpointController()
    running = {"node": "n1", "state": "running", "ready": True, "ip": "10.0.0.2", "usage": {"cpu": 1}}
    busier = {**running, "usage": {"cpu": 900}}
    assert not controller.wakes_on("observed/instance/default/web-a", running, busier)
    assert controller.wakes_on("observed/instance/default/web-a", running, {**running, "ready": False})
    assert controller.wakes_on("observed/instance/default/web-a", None, running)
    assert controller.wakes_on("observed/")  # a re-list: the values are not known
    assert controller.wakes_on("derived/placement/default/web-a", None, {"node": "n1"})
