"""Watch streams are bounded in bytes (issue 12 class 6): a client that stops reading while large
documents are written is dropped with RESOURCE_EXHAUSTED naming the revision to resume from; the
server's queued bytes stay bounded, other clients keep being served, and a client that reads
resumes without losing an event."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from ccattler.engine.api.errors import FellBehind, fell_behind_at
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.slice import DISPATCH_GAP, SliceHub
from ccattler.engine.api.slice_queue import Event, NodeQueue

LIMIT = 1024 * 1024
DOC = "x" * (256 * 1024)


def _queued(store, prefix: str) -> int:
    """What the store queues for the API clients' watches of `prefix` (the slice hub's own watch
    follows every prefix with the server's larger bound, and batches sends 0.1 s apart)."""
    return sum(watch.queued_bytes for watch in list(store._watches) if watch.prefix == prefix)


def test_a_stalled_watcher_is_dropped_and_a_reading_one_loses_nothing(make_cluster, caplog):
    caplog.set_level("WARNING", "ccattler.engine.api.client")
    cluster = make_cluster(watch_max_bytes=LIMIT)
    prefix = "observed/bounds/"
    start = cluster.store.revision()
    api = cluster.client()
    stalled = api.cluster.Watch(api_pb2.WatchRequest(prefix=prefix, from_revision=start))
    seen: list[int] = []
    reader_done = threading.Event()

    def read() -> None:
        for event in cluster.client().watch(prefix, start):
            seen.append(event["revision"])
            time.sleep(0.03)  # slower than the writer: it falls behind, is dropped, resumes
            if len(set(seen)) == 120:
                break
        reader_done.set()

    threading.Thread(target=read, daemon=True).start()
    time.sleep(0.5)  # both streams open
    written, peak = [], 0
    for i in range(120):  # 30 MiB of documents, 30 times the bound
        written.append(cluster.store.put(f"{prefix}doc-{i}", {"data": DOC}))
        peak = max(peak, _queued(cluster.store, prefix))
    assert api.json("Status")["revision"] == written[-1]  # still serving others meanwhile
    # Queued bytes never passed the bound plus one commit, on every watch together.
    assert peak <= 2 * (LIMIT + 2 * len(DOC)) + 65536
    with pytest.raises(grpc.RpcError) as caught:
        for _ in stalled:
            pass
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    details = caught.value.details()
    assert "watch fell behind at revision" in details and "re-list" in details, details
    assert start <= fell_behind_at(details) < written[-1]
    assert reader_done.wait(30), f"reader got {len(set(seen))} of {len(written)}"
    assert set(written) <= set(seen)
    assert "resuming from revision" in caplog.text  # the reader was dropped too, and resumed
    # The dropped stream's queue is gone from the store.
    deadline = time.monotonic() + 5
    while len(cluster.store._watches) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _queued(cluster.store, prefix) <= LIMIT


def test_a_stalled_slice_subscriber_is_dropped_and_its_agent_re_reads(tmp_path):
    from ccattler.engine.store import open_store

    store = open_store(f"sqlite://{tmp_path}/s.db")
    try:
        store.put("derived/endpoint/default/web", {"endpoints": []})
        hub = SliceHub(store, max_bytes=LIMIT)
        stalled = hub.batches("n1", 0, lambda: True)
        first = next(stalled)  # the initial slice, however large, does not count
        assert first[-1].kind == "synced"
        for i in range(12):  # apart: each its own dispatch (the hub gathers changes closer together)
            store.put("derived/endpoint/default/web", {"endpoints": [DOC], "i": i})
            time.sleep(1.5 * DISPATCH_GAP)
        deadline = time.monotonic() + 5
        with pytest.raises(FellBehind, match="watch fell behind at revision"):
            while time.monotonic() < deadline:
                next(stalled)
        while hub.revision < store.revision() and time.monotonic() < deadline + 5:
            time.sleep(0.01)
        # The agent resumes from its revision: the hub's history replays what it missed, each shared
        # document once, as it ended (engine/api/slice_history.py), not the twelve versions.
        resumed = next(hub.batches("n1", first[-1].revision, lambda: True))
        assert [(e.kind, e.value["i"]) for e in resumed] == [("put", 11)]
        # From before the history (it keeps a bounded number of events): a re-read.
        hub._history.since = store.revision()
        resumed = next(hub.batches("n1", first[-1].revision, lambda: True))
        assert resumed[0].kind == "resync"
    finally:
        hub.close()
        store.close()


def test_a_subscriber_counts_bytes_beyond_its_initial_slice_only():
    sub = NodeQueue("n1", max_bytes=2500)
    big = [Event("put", f"derived/placement/t/i{i}", None, 1, "y" * 900) for i in range(5)]
    sub.push(big, counted=False)
    assert sub.queued_bytes == 0
    sub.push([Event("put", "derived/placement/t/j", None, 2, "y" * 900)])
    sub.push([Event("put", "derived/placement/t/k", None, 3, "y" * 900)])
    assert len(sub.get(0, 10)) == 7 and sub.queued_bytes == 0
    sub.push([Event("put", "derived/placement/t/l", None, 4, "y" * 900)])
    sub.push([Event("put", "derived/placement/t/m", None, 5, "y" * 900)])
    sub.push([Event("put", "derived/placement/t/n", None, 6, "y" * 900)])
    with pytest.raises(FellBehind, match="at revision 3"):
        sub.get(0)
