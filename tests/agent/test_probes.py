"""Probe semantics (thresholds, startup gating, readiness) with scripted check results and a
hand-moved clock; the real checks (http, tcp, exec) run in the e2e tests."""

from __future__ import annotations

from ccattler.agent.probes import Probe, Prober, probes_of


class Script:
    """Check results per probe kind, consumed in order (the last one repeats)."""

    def __init__(self, **results: list[bool]) -> None:
        self.results = results
        self.calls: list[str] = []

    def __call__(self, probe: Probe, name: str, ip: str | None) -> tuple[bool, str]:
        self.calls.append(probe.kind)
        queue = self.results[probe.kind]
        ok = queue.pop(0) if len(queue) > 1 else queue[0]
        return ok, "HTTP 200" if ok else "HTTP 500"


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def run(prober: Prober, clock: Clock, probes: tuple[Probe, ...], ticks: int):  # noqa: ANN201
    verdicts = []
    for _ in range(ticks):
        verdicts.append(prober.observe("default/web-a", "10.0.0.2", probes, since=100.0))
        clock.now += 1
    return verdicts


def test_liveness_fails_after_the_threshold_in_a_row() -> None:
    clock = Clock()
    script = Script(liveness=[True, False, False, True, False, False, False])
    prober = Prober(script, clock, workers=0)
    liveness = Probe("liveness", "http", port=80, every=1, failure_threshold=3)
    verdicts = run(prober, clock, (liveness,), 7)
    assert [v.live for v in verdicts] == [True] * 6 + [False]
    assert [v.health for v in verdicts[:3]] == ["healthy", "unhealthy", "unhealthy"]
    assert verdicts[-1].reason == "liveness probe failed 3 times: HTTP 500"
    assert all(v.ready for v in verdicts[:6])  # liveness does not gate readiness


def test_startup_holds_the_others_back_then_readiness_needs_successes() -> None:
    clock = Clock()
    script = Script(startup=[False, True], liveness=[True], readiness=[True])
    prober = Prober(script, clock, workers=0)
    probes = (Probe("startup", "tcp", port=80, every=1, failure_threshold=5),
              Probe("readiness", "http", port=80, every=1, success_threshold=2),
              Probe("liveness", "http", port=80, every=1))
    verdicts = run(prober, clock, probes, 5)
    assert script.calls[:2] == ["startup", "startup"]
    assert [v.ready for v in verdicts] == [False, False, False, True, True]
    assert all(v.live for v in verdicts)


def test_initial_delay_and_restart_start_over() -> None:
    clock = Clock()
    script = Script(liveness=[False])
    prober = Prober(script, clock, workers=0)
    probe = Probe("liveness", "exec", command="true", every=1, failure_threshold=1, initial_delay=2)
    assert [v.live for v in run(prober, clock, (probe,), 3)] == [True, True, False]
    assert prober.observe("default/web-a", None, (probe,), since=clock.now).live  # a new container


def test_probes_of_a_service_document() -> None:
    doc = {"probes": {"liveness": {"type": "http", "path": "/healthz", "command": None, "port": 8080,
                                   "every": 5000, "timeout": 2000, "failure_threshold": 3,
                                   "success_threshold": 1, "initial_delay": 0},
                      "startup": None, "readiness": None}}
    (probe,) = probes_of(doc)
    assert (probe.kind, probe.path, probe.port, probe.every, probe.timeout) == ("liveness", "/healthz", 8080,
                                                                               5.0, 2.0)
