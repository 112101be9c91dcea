"""Kill one etcd member of three: writes continue on the other two (quorum kept); start it again
and it catches up — every acknowledged write is there, read from that member alone."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from ccattler.engine.store import StoreError, open_store
from tests.chaos.util import wait_for

pytestmark = pytest.mark.chaos


def test_member_loss_keeps_writes_and_the_member_catches_up(etcd3):
    store = open_store(etcd3.url + "&timeout=3")
    acknowledged: list[str] = []
    stop = threading.Event()
    errors: list[str] = []

    def writer() -> None:
        n = 0
        while not stop.is_set():
            key = f"desired/chaos/k{n}"
            try:
                ok, _ = store.txn((), [(key, {"n": n})], ())
                if ok:
                    acknowledged.append(key)
            except StoreError as exc:  # refused, never half-applied: the next write tries again
                errors.append(str(exc))
            n += 1

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        _wait_count(acknowledged, 20)
        etcd3.kill("m1")  # the first endpoint, the one the client talks to
        before = len(acknowledged)
        _wait_count(acknowledged, before + 50)  # writes continue on m2 and m3
        etcd3.run("start-member", "m1")
        _wait_count(acknowledged, len(acknowledged) + 20)
    finally:
        stop.set()
        thread.join(10)
    facts, _ = store.range("desired/chaos/")
    assert set(acknowledged) <= {f.key for f in facts}, "an acknowledged write was lost"
    # m1 alone (its own endpoint only) has caught up with everything acknowledged
    first = etcd3.url.split(",")[0] + "?" + etcd3.url.split("?", 1)[1]
    m1 = wait_for(lambda: _open(first), "the restarted member to answer", 15)
    try:
        wait_for(lambda: set(acknowledged) <= {f.key for f in m1.range("desired/chaos/")[0]},
                 "the restarted member to catch up", 15)
    finally:
        m1.close()
        store.close()


def _wait_count(items: list, count: int, timeout: float = 20) -> None:
    wait_for(lambda: len(items) >= count, f"{count} acknowledged writes", timeout)


def _open(url: str):
    try:
        return open_store(url)
    except StoreError:
        return None


@pytest.mark.parametrize("fault", ["kill", "pause"])
def test_lease_keepalives_survive_the_loss_of_their_member(etcd3, fault):
    """Keepalives share one stream to one member: killed (the stream breaks) or paused (the stream
    goes silent), the keepalives move to another member before the lease's TTL runs out."""
    store = open_store(etcd3.url + "&timeout=2")
    lease = store.lease_grant(6)
    store.txn((), [("desired/chaos/leased", {"up": True})], (), lease=lease)
    try:
        for _ in range(3):
            store.lease_keepalive(lease)
        if fault == "kill":
            etcd3.kill("m1")
        else:
            os.kill(etcd3.pid("m1"), signal.SIGSTOP)
        renewed = 0
        failures: list[str] = []
        for _ in range(8):  # 8 s, beyond the 6 s TTL: the lease lives only if renewals went on
            try:
                store.lease_keepalive(lease)
                renewed += 1
            except StoreError as exc:
                failures.append(str(exc))
            time.sleep(1)
        assert renewed >= 5, failures
        assert store.get("desired/chaos/leased") is not None, "the lease expired"
    finally:
        if fault == "pause":
            os.kill(etcd3.pid("m1"), signal.SIGCONT)
        store.close()
