"""The autoscale controller on snapshots: cgroup usage and pushed samples in, derived/scale out, the
instance controller following it, stale samples missing, and a failover keeping the down window
(the history is the stored document, so a fresh controller decides the same)."""

from types import MappingProxyType

from ccattler.dsl.compiler import compile_sources
from ccattler.dsl.sources import Source
from ccattler.engine.controllers.autoscale import AutoscaleController
from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.facts.snapshot import Snapshot

T0 = 1_767_603_600.0  # 2026-01-05 09:00 UTC
SRC = ('service web { image "nginx" instances 3 resources { cpu 500m memory 256Mi } '
       'scale { horizontal { min 2 max 10 target cpu = 50 target requests_per_second = 100 '
       'stabilization { scale_up 0s scale_down 5m } } } }')


def world(n, cpu=None, rps=None, rps_time=T0, scale=None):
    facts = dict(compile_sources([Source("w.cca", SRC)]))
    for i in range(n):
        facts[f"derived/instance/default/web/web-{i}"] = {"service": "default/web", "name": f"web-{i}"}
        facts[f"observed/instance/default/web-{i}"] = {
            "state": "running", "ready": True, "usage": None if cpu is None else {"cpu": cpu, "memory": 1}}
    if rps is not None:
        facts["observed/metric/default/web/requests_per_second/cli"] = {
            "value": rps, "time": rps_time, "source": "cli"}
    if scale is not None:
        facts["derived/scale/default/web"] = scale
    return Snapshot(1, MappingProxyType(facts))


def decide(controller, snap, now):
    return controller.reconcile(snap, now).puts.get("derived/scale/default/web")


def test_cpu_drives_a_scale_up_and_the_instance_controller_follows():
    doc = decide(AutoscaleController(), world(3, cpu=500), T0)
    assert (doc["desired"], doc["term"]) == (6, "target cpu")
    assert doc["event"]["from"] == 3 and doc["event"]["to"] == 6
    facts = dict(world(3, cpu=500).values)
    facts["derived/scale/default/web"] = doc
    puts = InstanceController().reconcile(Snapshot(2, MappingProxyType(facts)), T0).puts
    assert len([k for k in puts if k.startswith("derived/instance/default/web/")]) >= 3


def test_a_service_total_is_shared_by_the_instances_and_stale_samples_are_missing():
    doc = decide(AutoscaleController(), world(3, rps=900), T0)
    assert (doc["desired"], doc["term"]) == (9, "target requests_per_second")
    rps = next(t for t in doc["terms"] if t["metric"] == "requests_per_second")
    assert rps["sources"] == ["cli"]  # explain names where the samples came from
    stale = decide(AutoscaleController(sample_period=10), world(3, rps=900, rps_time=T0 - 31), T0)
    assert (stale["desired"], stale["term"]) == (3, "none")


def test_no_write_when_nothing_changed():
    c = AutoscaleController()
    doc = decide(c, world(3, cpu=250), T0)
    assert doc["desired"] == 3
    assert not c.reconcile(world(3, cpu=250, scale=doc), T0 + 15)


def test_failover_keeps_the_down_window():
    up = decide(AutoscaleController(), world(3, cpu=500), T0)           # 6 at 09:00
    busy = decide(AutoscaleController(), world(6, cpu=250, scale=up), T0 + 60)  # still 6, one write
    stored = busy or up
    # the old runner is gone; a new one reads the stored document at 09:02: load has dropped
    fresh = AutoscaleController()
    held = decide(fresh, world(6, cpu=50, rps=60, rps_time=T0 + 120, scale=stored), T0 + 120)
    assert held["desired"] == 6 and held["hold"]["direction"] == "down"
    assert "held at 6 until 09:07:00 by a recommendation at 09:02:00" in " ".join(held["reasons"])
    # the runner runs it again when the window ends, whether or not a sample arrives then
    assert fresh.next_due() == held["hold"]["until"] / 1000 + 0.01 == T0 + 420.01
    after = decide(AutoscaleController(), world(6, cpu=50, rps=60, rps_time=T0 + 421, scale=held), T0 + 421)
    assert after["desired"] == 2


def test_an_unreadable_metric_blocks_the_scale_down():
    doc = decide(AutoscaleController(), world(6, cpu=50, scale={"desired": 6, "history": []}), T0)
    assert (doc["desired"], doc["term"]) == (6, "blocked")


def test_explain_gains_a_scaling_section():
    from ccattler.engine.api.planning import explain_live
    from ccattler.engine.store import open_store

    up = decide(AutoscaleController(), world(3, cpu=500), T0)
    held = decide(AutoscaleController(), world(6, cpu=50, rps=60, rps_time=T0 + 60, scale=up), T0 + 60)
    with open_store("sqlite://:memory:") as store:
        for key, value in world(6).values.items():
            store.put(key, value)
        store.put("derived/scale/default/web", held)
        answer = explain_live(store, "web")
    scaling = answer["explanation"]["scaling"]
    assert scaling["desired"] == 6 and scaling["hold"]["direction"] == "down"
    assert [t["recommendation"] for t in scaling["terms"]] == [2, 1]
    text = "\n".join(answer["lines"])
    assert "winning term: target cpu" in text and "held at 6 until 09:06:00" in text
    assert "6 ready / 0 unready / 0 missing" in text and "last change 09:00:00: 3 → 6" in text


def test_get_services_shows_the_autoscalers_count_and_events_say_why():
    from ccattler.engine.api import views
    from ccattler.engine.store import open_store

    up = decide(AutoscaleController(), world(3, cpu=500), T0)
    with open_store("sqlite://:memory:") as store:
        for key, value in world(3).values.items():
            store.put(key, value)
        store.put("derived/scale/default/web", up)
        row = views.services(store, None, {})[0]
        assert (row["desired"], row["autoscaled"], row["scheduled"]) == (6, True, 3)
        reasons = [e["reason"] for e in views.events(store) if e["reason"]]
    assert reasons == ["scaled 3 → 6: target cpu recommends 6; target requests_per_second: "
                       "no requests_per_second samples for the counted instances"]


def test_only_reports_of_autoscaled_services_wake_it():
    c = AutoscaleController()
    assert c.wakes_on("observed/instance/default/db-0")  # before a first run: every report
    c.reconcile(world(2, cpu=250), T0)
    assert c.wakes_on("observed/instance/default/web-1", None, {"state": "running"})
    assert c.wakes_on("observed/instance/default/web-new")  # a new instance of web
    assert not c.wakes_on("observed/instance/default/db-0", None, {"state": "running"})
    assert not c.wakes_on("observed/instance/other/web-0")  # another tenant's web
    assert c.wakes_on("observed/instance/")  # a re-list
    assert c.wakes_on("observed/")
    assert c.wakes_on("observed/metric/default/db/cpu/cli")
    assert c.wakes_on("desired/service/default/db")  # db may now autoscale: every report, until it runs
    assert c.wakes_on("observed/instance/default/db-0")
    c.reconcile(world(2, cpu=250), T0 + 15)
    assert not c.wakes_on("observed/instance/default/db-0")


def test_vertical_uses_each_instances_window_p95_before_its_current_sample():
    """The agents publish each instance's P95 over the window (`cpu_p95`): a burst a minute ago
    still counts although the instances are quiet now; without it, the current sample is used."""
    src = ('service web { image "nginx" instances 2 resources { cpu 100m memory 64Mi } '
           'scale { vertical { cpu { min 50m max 1 } stabilization { scale_up 0s } } } }')
    facts = dict(compile_sources([Source("w.cca", src)]))
    for i, usage in enumerate(({"cpu": 20, "cpu_p95": 350, "memory": 1}, {"cpu": 20, "memory": 1})):
        facts[f"derived/instance/default/web/web-{i}"] = {"service": "default/web", "name": f"web-{i}"}
        facts[f"observed/instance/default/web-{i}"] = {"state": "running", "ready": True, "usage": usage}
    doc = decide(AutoscaleController(), Snapshot(1, MappingProxyType(facts)), T0)
    assert doc["vertical"]["cpu"]["p95"] == 350 and doc["requests"] == {"cpu": 500}, doc


def test_a_young_instance_whose_sample_reaches_back_before_it_became_ready_is_set_aside_for_cpu():
    """The agents report `started`, `ready_since` and the cpu sample's `at`/`window`: the live
    controller applies the HPA's cpu initialization rule (engine/autoscale/calc.cpu_set_aside)."""
    snap = world(2, cpu=400)
    facts = dict(snap.values)
    young = {**facts["observed/instance/default/web-0"], "started": T0 - 60, "ready_since": T0 - 15,
             "usage": {"cpu": 400, "memory": 1, "at": T0 - 10, "window": 10}}
    settled = {**facts["observed/instance/default/web-1"], "started": T0 - 3600, "ready_since": T0 - 3590,
               "usage": {"cpu": 400, "memory": 1, "at": T0 - 10, "window": 10}}
    facts["observed/instance/default/web-0"], facts["observed/instance/default/web-1"] = young, settled
    doc = decide(AutoscaleController(), Snapshot(1, MappingProxyType(facts)), T0)
    cpu = next(t for t in doc["terms"] if t["metric"] == "cpu")
    assert (cpu["ready"], cpu["unready"]) == (1, 1), cpu
    facts["observed/instance/default/web-0"] = {**young, "ready_since": T0 - 30}  # a whole window ready
    doc = decide(AutoscaleController(), Snapshot(1, MappingProxyType(facts)), T0)
    cpu = next(t for t in doc["terms"] if t["metric"] == "cpu")
    assert (cpu["ready"], cpu["unready"]) == (2, 0), cpu


def test_an_autoscaled_count_stays_within_the_tenant_quota():
    """Admission holds a service's committed count (`instances`, or `min`) within the quota; above
    it the autoscaler grows only into what the tenant's other services leave, and says so."""
    src = ('tenant default { quota { instances 10 } }\n'
           'service a { image "nginx" instances 4 resources { cpu 100m memory 64Mi } }\n'
           'service web { image "nginx" instances 2 resources { cpu 100m memory 64Mi } '
           'scale { horizontal { min 2 max 20 target queue = 10 } } }')
    facts = dict(compile_sources([Source("w.cca", src)]))
    facts["observed/metric/default/web/queue/cli"] = {"value": 120, "time": T0, "source": "cli"}
    for i in range(2):
        facts[f"derived/instance/default/web/web-{i}"] = {"service": "default/web", "name": f"web-{i}"}
        facts[f"observed/instance/default/web-{i}"] = {"state": "running", "ready": True, "usage": None}
    doc = decide(AutoscaleController(), Snapshot(1, MappingProxyType(facts)), T0)
    assert doc["recommended"] == 12 and doc["desired"] == 6, doc
    assert doc["clamp"] == "lowered to 6 by tenant default's instances quota (10)", doc["clamp"]
    assert any("quota" in r for r in doc["reasons"]) and doc["event"]["to"] == 6
