"""The runner under faults: a controller that raises does not stop the others; an etcd outage
(kill, then restart on the same data) is survived and work resumes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from runner_builders import TTL, Copy, eventually

from ccattler.engine.facts.snapshot import ChangeSet, Snapshot
from ccattler.engine.runner import Runner
from ccattler.engine.store import open_store
from ccattler.engine.store.etcd_process import EtcdProcess


@dataclass
class Broken:
    name: ClassVar[str] = "broken"
    reads: ClassVar[tuple[str, ...]] = ("in/",)
    writes: ClassVar[tuple[str, ...]] = ("broken/",)

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        raise RuntimeError("a controller bug")


def test_a_failing_controller_is_counted_and_the_others_go_on(store, runners):
    runner = runners(store, [Broken(), Copy()])
    store.put("in/a", {"v": 1})
    assert eventually(lambda: store.get("out/a") is not None)
    assert runner.stats["broken"].errors >= 1 and runner.stats["copy"].errors == 0


def test_the_runner_survives_an_etcd_outage(tmp_path):
    (tmp_path / "etcd").mkdir()
    with EtcdProcess(str(tmp_path / "etcd")) as etcd, open_store(etcd.url) as store:
        runner = Runner(store, [Copy()], leader_ttl=TTL, debounce=0.01)
        runner.start()
        try:
            store.put("in/a", {"v": 1})
            assert eventually(lambda: store.get("out/a") is not None)
            etcd.kill()
            time.sleep(1.0)
            etcd.start()
            store.put("in/b", {"v": 2})
            assert eventually(lambda: store.get("out/b") is not None, timeout=30)
            assert eventually(lambda: runner.is_leader, timeout=15)
            store.delete("in/a")
            assert eventually(lambda: store.get("out/a") is None, timeout=15)
        finally:
            runner.stop()
