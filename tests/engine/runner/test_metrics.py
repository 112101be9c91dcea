"""The runner's Prometheus collector exposes per-controller counters and leadership."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from runner_builders import Copy, eventually

from ccattler.engine.runner.metrics import RunnerCollector


def test_counters_and_leadership_are_scraped(sqlite_store, runners):
    runner = runners(sqlite_store, [Copy()])
    registry = CollectorRegistry()
    registry.register(RunnerCollector(runner))
    sqlite_store.put("in/a", {"v": 1})
    assert eventually(lambda: sqlite_store.get("out/a") is not None)
    assert eventually(lambda: registry.get_sample_value("cca_runner_leader") == 1.0)
    assert registry.get_sample_value("cca_controller_commits_total", {"controller": "copy"}) >= 1
    assert registry.get_sample_value("cca_controller_reconcile_seconds_total", {"controller": "copy"}) > 0
    text = generate_latest(registry).decode()
    assert 'cca_controller_conflicts_total{controller="copy"} 0.0' in text
    runner.stop()
    assert registry.get_sample_value("cca_runner_leader") == 0.0
