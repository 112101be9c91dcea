"""NodeCore: from a slice of facts (docs/facts.md shapes) to running processes and observed docs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ccattler.agent.machine import machine_capacity, node_document
from ccattler.agent.node import NodeCore
from ccattler.agent.reconcile import Backoff
from ccattler.agent.runtime.process import ProcessRuntime
from ccattler.agent.runtime.sim import SimRuntime
from ccattler.engine.facts import CcaError


def slice_for(node: str, *instances: str, command: str = "exec sleep 30") -> dict:
    facts = {"desired/service/default/web": {"kind": "service", "tenant": "default", "name": "web",
                                             "image": "busybox", "command": command, "env": {},
                                             "config": {"env": {}, "files": []},
                                             "resources": {"cpu": 100, "memory": 1 << 20}},
             f"derived/network/subnet/{node}": {"node": node, "subnet": "10.88.3.0/24"}}
    for n, name in enumerate(instances, start=2):
        facts[f"derived/placement/default/{name}"] = {"service": "default/web", "instance": name,
                                                      "node": node, "revision": 1, "score": 0}
        facts[f"derived/network/ip/default/{name}"] = {"node": node, "ip": f"10.88.3.{n}"}
    return facts


def test_process_node_runs_and_removes_what_the_slice_says(tmp_path: Path) -> None:
    core = NodeCore("n1", ProcessRuntime(tmp_path), state_dir=tmp_path, backoff=Backoff(initial=0.1))
    try:
        observed = core.apply(slice_for("n1", "web-a", "web-b"))
        assert {k: v["state"] for k, v in observed.items()} == {
            "observed/instance/default/web-a": "running", "observed/instance/default/web-b": "running"}
        assert observed["observed/instance/default/web-a"]["ip"] is None  # no isolation, no own address
        observed = core.apply(slice_for("n1", "web-a"))
        assert list(observed) == ["observed/instance/default/web-a"]
        assert [s.name for s in core.runtime.list()] == ["default/web-a"]
    finally:
        core.shutdown(remove=True)
    assert core.runtime.list() == []


def test_crashing_process_restarts_with_backoff(tmp_path: Path) -> None:
    core = NodeCore("n1", ProcessRuntime(tmp_path), state_dir=tmp_path, backoff=Backoff(initial=0.1))
    try:
        facts = slice_for("n1", "job-a", command="exit 7")
        deadline = time.monotonic() + 5
        while (doc := core.apply(facts)["observed/instance/default/job-a"])["restarts"] < 2:
            assert time.monotonic() < deadline, doc
            time.sleep(0.05)
        assert doc["reason"].startswith("exited with code 7")
    finally:
        core.shutdown(remove=True)


def test_many_sim_nodes_in_one_process_without_threads() -> None:
    before = set(threading.enumerate())
    cores = [NodeCore(f"n{i}", SimRuntime()) for i in range(200)]
    for i, core in enumerate(cores):
        assert len(core.apply(slice_for(f"n{i}", f"web-{i}a", f"web-{i}b"))) == 2
    assert sum(len(c.runtime.list()) for c in cores) == 400
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith("cca-reconcile")]
    for core in cores:
        core.shutdown()


def test_node_document_reads_the_machine() -> None:
    doc = node_document(labels={"disk": "ssd"}, zone="a", restrictions=("gpu",), address="192.0.2.1")
    assert doc["capacity"] == machine_capacity() and doc["capacity"]["cpu"] >= 1000
    assert (doc["labels"], doc["zone"], doc["restrictions"], doc["address"]) == (
        {"disk": "ssd"}, "a", ["gpu"], "192.0.2.1")
    assert doc["architecture"] in ("amd64", "arm64")


class _Gates:
    """Stands in for the node's HAProxy (tests/agent/gates/test_haproxy.py reads a real one)."""

    def __init__(self) -> None:
        self.answers: list[dict[str, float] | None] = [{"default/web": 40.0}, None, {}]

    def request_rates(self, now: float) -> dict[str, float] | None:
        return self.answers.pop(0)


def test_gate_request_rates_are_reported_as_autoscaler_samples(tmp_path: Path) -> None:
    core = NodeCore("n1", SimRuntime(), state_dir=tmp_path)
    key = "observed/metric/default/web/requests_per_second/n1"
    try:
        core.gates = _Gates()
        assert core.apply({})[key]["value"] == 40.0
        assert key in core.apply({})  # not due yet: the sample stays
        core._next_load = 0.0
        assert core.apply({})[key]["value"] == 40.0  # HAProxy did not answer: it stays (goes stale)
        core._next_load = 0.0
        assert key not in core.apply({})  # no gate to the service any more
    finally:
        core.gates = None
        core.shutdown(remove=True)


def test_a_gate_that_served_no_request_for_ten_minutes_reports_nothing(tmp_path: Path) -> None:
    """At 1,000 nodes every HAProxy's zero for every gated service would be most of the store's
    writes on an idle cluster: a node reports a gated service's zeros only for 10 minutes after
    its last request there (as the data plane's connection counts; time to scale down)."""
    core = NodeCore("n1", SimRuntime(), state_dir=tmp_path)
    key = "observed/metric/default/web/requests_per_second/n1"
    gates = _Gates()
    gates.answers = [{"default/web": 0.0}, {"default/web": 3.0}, {"default/web": 0.0}, {"default/web": 0.0}]
    try:
        core.gates = gates
        assert key not in core.apply({})  # never served from here: nothing written
        core._next_load = 0.0
        assert core.apply({})[key]["value"] == 3.0
        core._next_load = 0.0
        assert core.apply({})[key]["value"] == 0.0  # stopped: zeros, so it can scale down
        core.gate_load._active = {s: at - 600 for s, at in core.gate_load._active.items()}  # 10 min on
        core._next_load = 0.0
        assert key not in core.apply({})
    finally:
        core.gates = None
        core.shutdown(remove=True)


def test_the_metric_interval_sets_sampling_and_rewrite_periods(tmp_path: Path) -> None:
    """`cca agent --metric-interval 2`: counters read every 2 s, a steady sample rewritten every
    6 s (three intervals; 30 s at the default 10 s); beyond the autoscaler's 15 s sample period an
    interval is refused (its samples would go stale between reads)."""
    core = NodeCore("n1", SimRuntime(), state_dir=tmp_path, metric_interval=2.0)
    try:
        assert (core.metric_interval, core.load.refresh) == (2.0, 6.0)
        assert NodeCore("n2", SimRuntime(), metric_interval=10.0).load.refresh == 30.0
    finally:
        core.shutdown(remove=True)
    for bad in (0.0, 16.0):
        with pytest.raises(CcaError, match="metric interval"):
            NodeCore("n3", SimRuntime(), metric_interval=bad)
