"""The reconcile core against the sim runtime with a hand-moved clock (the logic, no kernel)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ccattler.agent.desired import InstanceSpec, desired_instances
from ccattler.agent.reconcile import Backoff, Reconciler
from ccattler.agent.runtime.base import SecretFile
from ccattler.agent.runtime.sim import SimProfile, SimRuntime
from ccattler.engine.facts import CcaError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def instance(name: str, image: str = "busybox", command: str | None = "httpd -f") -> InstanceSpec:
    return InstanceSpec(tenant="default", name=name, service="default/web", image=image, command=command,
                        cpu=100, memory=32 << 20, ip="10.1.0.5")


def want(*specs: InstanceSpec) -> dict[str, InstanceSpec]:
    return {s.key: s for s in specs}


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(clock: Clock, **profile: object) -> tuple[SimRuntime, Reconciler]:
    runtime = SimRuntime(SimProfile(start_delay=0.5, **profile), clock=clock)  # type: ignore[arg-type]
    return runtime, Reconciler("n1", runtime, backoff=Backoff(initial=1, maximum=8, reset_after=30),
                               clock=clock, workers=2)


def test_starts_missing_instances_and_reports_starting_then_running(clock: Clock) -> None:
    runtime, rec = make(clock)
    observed = rec.reconcile(want(instance("web-a"), instance("web-b")))
    assert set(observed) == {"observed/instance/default/web-a", "observed/instance/default/web-b"}
    assert observed["observed/instance/default/web-a"]["state"] == "starting"
    clock.now += 1
    doc = rec.reconcile(want(instance("web-a"), instance("web-b")))["observed/instance/default/web-a"]
    started, ready_since = doc.pop("started"), doc.pop("ready_since")
    assert doc == {"node": "n1", "state": "running", "ip": None, "restarts": 0, "reason": None,
                   "health": None, "ready": True}
    assert started is not None and isinstance(ready_since, float)  # for the autoscaler's cpu rule
    assert [s.state for s in runtime.list()] == ["running", "running"]


def test_removes_what_is_no_longer_placed_and_orphans(clock: Clock) -> None:
    runtime, rec = make(clock)
    rec.reconcile(want(instance("web-a"), instance("web-b")))
    observed = rec.reconcile(want(instance("web-a")))
    assert list(observed) == ["observed/instance/default/web-a"]
    assert [s.name for s in runtime.list()] == ["default/web-a"]


def test_crash_restarts_with_exponential_backoff_and_says_why(clock: Clock) -> None:
    runtime, rec = make(clock, crash_probability=1.0, crash_after=(1.0, 1.0))
    desired = want(instance("web-a"))
    rec.reconcile(desired)
    delays = []
    for attempt in range(1, 4):
        clock.now += 1.6  # start delay 0.5 + crash after 1.0
        doc = rec.reconcile(desired)["observed/instance/default/web-a"]
        assert doc["state"] == "failed" and doc["restarts"] == attempt
        assert doc["reason"].startswith("simulated crash (exit code 1); retrying in")
        delays.append(rec.next_wakeup())
        clock.now += delays[-1]
        assert rec.reconcile(desired)["observed/instance/default/web-a"]["state"] == "starting"
    assert delays == [1, 2, 4]


def test_backoff_is_forgotten_after_running_long_enough(clock: Clock) -> None:
    runtime, rec = make(clock)
    desired = want(instance("web-a"))
    rec.reconcile(desired)
    clock.now += 1
    runtime.stop("default/web-a")  # a crash
    rec.reconcile(desired)
    clock.now += 1
    rec.reconcile(desired)
    for _ in range(3):
        clock.now += 20
        doc = rec.reconcile(desired)["observed/instance/default/web-a"]
    assert doc["state"] == "running" and doc["restarts"] == 1
    assert rec._records["default/web-a"].failures == 0


def test_changed_spec_replaces_the_container(clock: Clock) -> None:
    runtime, rec = make(clock)
    rec.reconcile(want(instance("web-a")))
    clock.now += 1
    rec.reconcile(want(instance("web-a", image="busybox:2")))
    (status,) = runtime.list()
    assert status.spec_hash == instance("web-a", image="busybox:2").spec_hash


def test_start_failure_is_reported_and_retried(clock: Clock) -> None:
    runtime, rec = make(clock)
    original = runtime.create
    calls = []

    def flaky(spec):  # noqa: ANN001, ANN202
        calls.append(spec.name)
        if len(calls) == 1:
            from ccattler.agent.runtime.base import ContainerError
            raise ContainerError("image busybox is not in the local store")
        return original(spec)

    runtime.create = flaky  # type: ignore[method-assign]
    doc = rec.reconcile(want(instance("web-a")))["observed/instance/default/web-a"]
    assert doc["state"] == "failed"
    assert doc["reason"].startswith("start failed: image busybox is not in the local store; retrying in 1s")
    clock.now += 1
    assert rec.reconcile(want(instance("web-a")))["observed/instance/default/web-a"]["state"] == "starting"


def test_desired_instances_reads_the_slice() -> None:
    facts = {
        "derived/placement/default/web-a": {"service": "default/web", "instance": "web-a", "node": "n1",
                                            "revision": 3, "score": 0},
        "derived/placement/default/web-b": {"service": "default/web", "instance": "web-b", "node": "n2",
                                            "revision": 3, "score": 0},
        "desired/service/default/web": {
            "image": "busybox", "command": "httpd -f", "resources": {"cpu": 100, "memory": 1024},
            "expose": [{"port": 8080, "protocol": "tcp", "external": False}],
            "probes": {"liveness": {"type": "http", "path": "/", "port": None, "every": 5000},
                       "startup": None, "readiness": None},
            "env": {"A": "1"}, "config": {"env": {"B": "2"},
                                          "files": [{"path": "/etc/x", "content": "y", "from": None}]}},
        "derived/instance/default/web/web-a": {"image": "busybox:2",
                                               "resources": {"cpu": 200, "memory": 2048}},
        "derived/network/ip/default/web-a": {"ip": "10.1.0.7"},
    }
    (spec,) = desired_instances(facts, "n1").values()
    assert (spec.key, spec.image, spec.cpu, spec.memory, spec.ip) == ("default/web-a", "busybox:2", 200, 2048,
                                                                      "10.1.0.7")
    assert dict(spec.env) == {"A": "1", "B": "2"}
    assert spec.files[0].path == "/etc/x"
    assert [(p.kind, p.port, p.every) for p in spec.probes] == [("liveness", 8080, 5.0)]


def test_an_old_spec_instance_is_built_from_the_rollout_documents_fields() -> None:
    """During a rolling update (or after a rollback) an instance keeps its own spec's command and
    env: the rollout document carries them; the current spec's instances use the service's."""
    def placed(name: str) -> tuple[str, dict]:
        return f"derived/placement/default/{name}", {"service": "default/web", "instance": name, "node": "n1"}

    facts = dict([placed("web-old"), placed("web-new")])
    facts["desired/service/default/web"] = {"image": "app:2", "command": "serve --v2", "env": {"MODE": "new"}}
    facts["derived/instance/default/web/web-old"] = {"spec": "v1", "image": "app:1"}
    facts["derived/instance/default/web/web-new"] = {"spec": "v2", "image": "app:2"}
    facts["derived/rollout/default/web"] = {"spec": "v2", "fields": {
        "v1": {"image": "app:1", "command": "serve --v1", "env": {"MODE": "old"}}}}
    specs = desired_instances(facts, "n1")
    old, new = specs["default/web-old"], specs["default/web-new"]
    assert (old.image, old.command, dict(old.env)) == ("app:1", "serve --v1", {"MODE": "old"})
    assert (new.image, new.command, dict(new.env)) == ("app:2", "serve --v2", {"MODE": "new"})
    # Just after an apply the rollout document still names the old spec (the controller has not
    # run yet): the old instance keeps its own fields, never rebuilt from the new service document.
    del facts["derived/instance/default/web/web-new"], facts["derived/placement/default/web-new"]
    facts["derived/rollout/default/web"] = {"spec": "v1", "fields": {
        "v1": {"image": "app:1", "command": "serve --v1", "env": {"MODE": "old"}}}}
    (old,) = desired_instances(facts, "n1").values()
    assert (old.command, dict(old.env)) == ("serve --v1", {"MODE": "old"})


class SecretSim(SimRuntime):
    """The sim runtime noting each secret rewrite (it keeps no files)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(SimProfile(start_delay=0.0), clock=clock)
        self.rewritten: list[tuple[str, tuple]] = []

    def refresh_secrets(self, name: str, secrets: tuple) -> int:
        self.rewritten.append((name, secrets))
        return len(secrets)


def test_the_secret_refresh_is_one_call_per_node_for_every_instance(clock: Clock, caplog) -> None:
    runtime = SecretSim(clock)
    singles: list[str] = []
    batches: list[list[str]] = []

    def one(key: str) -> list:
        singles.append(key)
        return [("default/token", b"v1", "")]

    def many(keys: list[str]) -> dict:
        batches.append(keys)
        return {key: CcaError("not placed on n1") if key.endswith("web-c") else [("default/token", b"v2", "")]
                for key in keys}

    rec = Reconciler("n1", runtime, clock=clock, workers=2, secrets=one, secrets_many=many, secret_refresh=15)
    specs = want(*(replace(instance(f"web-{x}"), secrets=("default/token",)) for x in "abc"),
                 instance("web-plain"))  # no secrets: never asked for
    late = specs.pop("default/web-c")
    rec.reconcile(specs)
    clock.now += 9  # web-c starts 9 s after the others: still the same refresh call
    specs[late.key] = late
    rec.reconcile(specs)
    rec.reconcile(specs)
    assert sorted(singles) == ["default/web-a", "default/web-b", "default/web-c"] and batches == []  # starts
    clock.now += 7
    rec.reconcile(specs)
    assert [sorted(b) for b in batches] == [["default/web-a", "default/web-b", "default/web-c"]]
    assert len(singles) == 3  # the tick asked no instance on its own
    assert sorted(name for name, _ in runtime.rewritten) == ["default/web-a", "default/web-b"]
    assert {files for _, files in runtime.rewritten} == {(SecretFile("/run/secrets/token", b"v2"),)}
    assert "default/web-c" in caplog.text and "not placed on n1" in caplog.text  # the others went on
    clock.now += 5
    rec.reconcile(specs)
    assert len(batches) == 1  # not before the next period


def test_without_a_batch_source_the_tick_asks_each_instance(clock: Clock) -> None:
    runtime = SecretSim(clock)
    asked: list[str] = []
    rec = Reconciler("n1", runtime, clock=clock, workers=2, secret_refresh=15,
                     secrets=lambda key: asked.append(key) or [("default/token", b"v", "/run/t")])
    specs = want(*(replace(instance(f"web-{x}"), secrets=("default/token",)) for x in "ab"))
    rec.reconcile(specs)
    rec.reconcile(specs)
    clock.now += 16
    rec.reconcile(specs)
    assert sorted(asked) == ["default/web-a", "default/web-a", "default/web-b", "default/web-b"]
    assert len(runtime.rewritten) == 2


def test_ready_since_is_the_wall_time_readiness_last_changed(clock: Clock) -> None:
    """Reported with every running instance; it moves only when readiness flips (no rewrite storm)."""
    runtime = make(clock)[0]
    wall = [5000.0]
    rec = Reconciler("n1", runtime, clock=clock, workers=1, wall=lambda: wall[0])
    rec.reconcile(want(instance("web-a")))
    clock.now += 1
    wall[0] = 5001.0
    first = rec.reconcile(want(instance("web-a")))["observed/instance/default/web-a"]
    assert first["ready"] is True and first["ready_since"] == 5001.0
    clock.now += 1
    wall[0] = 5002.0
    again = rec.reconcile(want(instance("web-a")))["observed/instance/default/web-a"]
    assert again["ready_since"] == 5001.0
