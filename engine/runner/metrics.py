"""Prometheus view of a runner: its per-controller counters and whether it leads, read at scrape time.

Register it on the server's registry: `registry.register(RunnerCollector(runner))`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ccattler.engine.runner.loop import Runner

#: ControllerStats field → (metric name, help, kind).
_FIELDS = {
    "reconciles": ("cca_controller_reconciles", "Reconcile calls", "counter"),
    "commits": ("cca_controller_commits", "Transactions committed", "counter"),
    "committed_ops": ("cca_controller_committed_ops", "Puts and deletes committed", "counter"),
    "conflicts": ("cca_controller_conflicts", "Commits refused by a guard (then retried)", "counter"),
    "fenced": ("cca_controller_fenced", "Commits refused because leadership was lost (fencing)", "counter"),
    "dropped_writes": ("cca_controller_dropped_writes", "Writes outside the controller's domain, dropped",
                       "counter"),
    "noop_writes": ("cca_controller_noop_writes", "Writes that would change nothing, skipped", "counter"),
    "errors": ("cca_controller_errors", "Reconciles or commits that raised", "counter"),
    "reconcile_seconds_sum": ("cca_controller_reconcile_seconds", "Time spent in reconcile", "counter"),
    "reconcile_seconds_max": ("cca_controller_reconcile_seconds_max", "Longest reconcile", "gauge"),
    "last_revision": ("cca_controller_last_commit_revision", "Store revision of the last commit", "gauge"),
}


class RunnerCollector:
    """A prometheus_client collector over `runner.stats` and `runner.is_leader`."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def collect(self) -> Iterator[Metric]:
        for field, (name, help_text, kind) in _FIELDS.items():
            family_type = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            family = family_type(name, help_text, labels=["controller"])
            for controller, stats in self.runner.stats.items():
                family.add_metric([controller], getattr(stats, field))
            yield family
        leader = GaugeMetricFamily("cca_runner_leader", "1 while this runner holds leader/runner")
        leader.add_metric([], 1.0 if self.runner.is_leader else 0.0)
        yield leader
