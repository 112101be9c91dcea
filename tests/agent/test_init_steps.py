"""Init steps through the reconciler on the process runtime (real commands, a hand-moved clock for
the backoff): order, retries with capped backoff, failure with the step's exit code and output,
restarts skip them, replacements run them again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ccattler.agent.desired import InstanceSpec
from ccattler.agent.init_steps import MAX_DELAY, InitStep, init_steps
from ccattler.agent.reconcile import Backoff, Reconciler
from ccattler.agent.runtime.base import VolumeMount
from ccattler.agent.runtime.process import ProcessRuntime


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup(tmp_path: Path):
    clock = Clock()
    runtime = ProcessRuntime(tmp_path)
    rec = Reconciler("n1", runtime, backoff=Backoff(initial=1, maximum=8, reset_after=30), clock=clock,
                     workers=1)
    yield clock, runtime, rec
    rec.remove_all()
    rec.close()


def spec(command: str = "exec sleep 30", *steps: InitStep) -> InstanceSpec:
    return InstanceSpec(tenant="default", name="web-0", service="default/web", image="busybox",
                        command=command, init=steps, volumes=(VolumeMount("default/data", "/data"),))


def until(rec: Reconciler, want: InstanceSpec, clock: Clock, state: str, step: float = 0.0,
          timeout: float = 10.0) -> dict:
    """Reconcile (moving the clock by `step` each time) until the instance is in `state`."""
    deadline = time.monotonic() + timeout
    while True:
        doc = rec.reconcile({want.key: want})[want.observed_key]
        if doc["state"] == state:
            return doc
        assert time.monotonic() < deadline, doc
        clock.now += step
        time.sleep(0.05)


def test_steps_run_in_order_before_the_main_container_and_share_its_volumes(setup) -> None:
    clock, runtime, rec = setup
    want = spec("cat data/order; exec sleep 30",
                InitStep("echo one >> data/order"), InitStep("echo two >> data/order; echo said two"))
    doc = rec.reconcile({want.key: want})[want.observed_key]
    assert doc["state"] == "starting" and "init step 1/2" in doc["reason"]
    assert [s.name for s in runtime.list()] == ["default/web-0/init-0"]  # the main one waits
    doc = until(rec, want, clock, "running")
    assert doc["init"] == {"steps": 2, "passed": 2, "attempt": 1, "failed": None}
    assert [s.name for s in runtime.list()] == ["default/web-0"]  # the steps' containers are gone
    time.sleep(0.2)
    assert runtime.logs(want.key) == b"one\ntwo\n"
    log = runtime.init_log_path(want.key).read_text()
    assert "init step 1/2: echo one" in log and "said two" in log and "--- exit code 0 ---" in log


def test_a_failing_step_is_retried_with_capped_backoff_then_fails_the_instance(setup) -> None:
    clock, runtime, rec = setup
    want = spec("exec sleep 30", InitStep("echo ok"), InitStep("echo broken db; exit 3", retry=2))
    delays = []
    while True:
        doc = rec.reconcile({want.key: want})[want.observed_key]
        if doc["state"] == "failed":
            break
        progress = rec._records[want.key].init
        if progress.retry_at > clock.now:
            delays.append(progress.retry_at - clock.now)
            clock.now = progress.retry_at
        time.sleep(0.05)
    assert delays == [1.0, 2.0]
    assert doc["init"]["failed"] == {"step": 2, "exec": "echo broken db; exit 3", "exit_code": 3,
                                     "attempts": 3, "output": "broken db\n"}
    assert doc["reason"] == ("init step 2/2 ('echo broken db; exit 3') failed: exit code 3 after 3 "
                             "attempt(s): broken db")
    assert runtime.list() == []  # the main container never started
    clock.now += 600  # failed stays failed (a new apply replaces it)
    assert rec.reconcile({want.key: want})[want.observed_key]["state"] == "failed"
    assert MAX_DELAY == 10.0


def test_a_restart_skips_the_steps_and_a_replacement_runs_them_again(setup) -> None:
    clock, runtime, rec = setup
    want = spec("exec sleep 30", InitStep("echo ran >> data/count"))
    until(rec, want, clock, "running")
    runtime.stop(want.key, timeout=1)
    until(rec, want, clock, "running", step=5)  # crashed, restarted after its backoff
    assert rec._records[want.key].restarts == 1
    count = runtime.volumes.prepare(VolumeMount("default/data", "/data")) / "count"
    assert count.read_text() == "ran\n"
    replaced = spec("exec sleep 31", InitStep("echo ran >> data/count"))
    until(rec, replaced, clock, "running")
    assert count.read_text() == "ran\nran\n"


def test_a_step_past_its_timeout_is_stopped_and_counts_as_a_failure(setup) -> None:
    clock, runtime, rec = setup
    want = spec("exec sleep 30", InitStep("exec sleep 30", timeout=5))
    rec.reconcile({want.key: want})
    clock.now += 6
    doc = until(rec, want, clock, "failed")
    assert doc["init"]["failed"]["exit_code"] is None and "timed out" in doc["reason"]


def test_init_steps_read_from_the_service_document() -> None:
    steps = init_steps({"init": [{"exec": "migrate", "timeout": 30000, "retry": 3},
                                 {"exec": "seed", "timeout": None, "retry": 0}]})
    assert steps == (InitStep("migrate", 30.0, 3), InitStep("seed", 600.0, 0))
