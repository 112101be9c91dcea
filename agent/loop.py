"""The agent process's loop on top of the API: register the node under a lease and keep it alive,
fold the node's slice from the watch, reconcile on every change of its own and every `tick` seconds, and
report only what changed. Knobs: `ttl` (the node lease), `tick`, `retry` (after a broken watch or
heartbeat: re-watch from the last revision seen, re-register under a new lease; the first retry's
ceiling, later ones back off with full jitter up to `ttl`, engine/api/backoff.py), `start_jitter`
(the first registration waits a random delay in [0, start_jitter) s: agents started together).

`client` is an `engine.api.agent_client.AgentClient` (anything with `register`, `heartbeat`,
`watch_slice` and `report`); `core` a `NodeCore`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from ccattler.agent.node import NodeCore
from ccattler.agent.runtime.logindex import LogIndexer
from ccattler.agent.slice_state import Reporter, SliceState
from ccattler.agent.tunnel import AgentTunnel
from ccattler.engine.api.agent_client import LAZY_PREFIXES
from ccattler.engine.api.backoff import Backoff, start_delay
from ccattler.engine.facts import CcaError
from ccattler.engine.facts.keys import ENDPOINTS, VIPS

log = logging.getLogger(__name__)

#: Seconds a summoned logs/exec tunnel stays open without sessions (a `cca logs` right after
#: another reuses it).
TUNNEL_LINGER = 60.0
#: VIP and endpoint documents: their changes reach the data plane (and gates) at once, without a
#: whole reconcile — waiting for the tick made watch-to-kernel about one tick (p50 1.03 s at
#: tick 1 s, docs/benchmarks.md, "Watch-to-kernel").
SERVICE_PREFIXES = (ENDPOINTS, VIPS)
#: The least time between two such data-plane syncs: a burst of endpoint changes is one apply
#: (each rebuilds the node's whole service state: ~40 ms at 30,000 services).
SERVICE_SYNC_GAP = 0.05


class AgentLoop:
    """One node's agent: `run(stop)` until `stop` is set (containers keep running afterwards)."""

    def __init__(self, client: Any, core: NodeCore, node_doc: Mapping[str, Any], *, ttl: float = 10.0,
                 tick: float = 1.0, retry: float = 1.0, start_jitter: float = 0.0):
        self.client, self.core, self.node_doc = client, core, dict(node_doc)
        core.connect(client)
        self.ttl, self.tick, self.retry, self.start_jitter = ttl, tick, retry, start_jitter
        # Retries of registering and of the slice watch, each with its own count of failures.
        self._register_backoff = Backoff(base=retry, cap=max(retry, ttl))
        self._watch_backoff = Backoff(base=retry, cap=max(retry, ttl))
        self.tunnel_linger = TUNNEL_LINGER
        self.state = SliceState()
        self.reporter = Reporter()
        self._events: queue.Queue[tuple[int, dict[str, Any] | None]] = queue.Queue()
        self._generation = 0
        self._next_reconcile = 0.0
        self._services_pending = False  # VIP/endpoint changes not in the data plane yet
        self._services_synced = 0.0     # monotonic time of the last data-plane-only sync
        self._tunnel: AgentTunnel | None = None
        self._stop = threading.Event()
        self._document_changed = False  # node_doc changed since it was last registered

    def reconnect(self, client: Any) -> None:
        """Carry on over `client` (a renewed certificate's connection): the streams of the old one
        end, and the loop registers and watches again on this one."""
        self.client = client
        self.core.connect(client)

    def run(self, stop: threading.Event) -> None:
        heartbeat = None
        if stop.wait(start_delay(self.start_jitter)):
            return
        self.state.reset()  # a fresh watch from revision 0 brings the whole slice again
        self._watch(0)
        indexing = threading.Event()  # the log time index (`cca logs --since`) runs as long as we do
        LogIndexer(self.core.runtime).start(indexing)
        self._stop = stop
        try:
            while not stop.is_set():
                if heartbeat is None or not heartbeat.alive:
                    heartbeat = self._register(heartbeat, stop)
                elif self._plane_moved():  # the document under the live lease names another plane
                    fresh = self._register(None, stop)
                    if fresh is not None:
                        heartbeat.stop()  # its lease is revoked: the document moved to the new one
                        heartbeat = fresh
                urgent = self._drain(self._wait_time())
                # Containers are kept while the server is away. Cluster-wide documents (endpoints
                # of every service) change often and rarely matter to the containers: they wait for
                # the tick, and only the data plane and gates follow them at once.
                now = time.monotonic()
                if self.state.synced and (urgent or now >= self._next_reconcile):
                    self._next_reconcile = now + self.tick
                    self._services_pending = False  # a whole apply syncs the data plane too
                    try:
                        self._reconcile_and_report()
                    except Exception:  # a bug must not stop the node: log it, try again next tick
                        log.exception("reconcile failed; retrying in %g s", self.tick)
                elif self.state.synced and self._services_pending and \
                        now >= self._services_synced + SERVICE_SYNC_GAP:
                    self._services_pending, self._services_synced = False, now
                    try:
                        self.core.sync_services(self.state.facts)
                    except Exception:  # the next tick's whole apply tries again
                        log.exception("data plane sync failed; retrying on the next tick")
        finally:
            indexing.set()
            if self._tunnel is not None:
                self._tunnel.close()
            if heartbeat is not None:
                heartbeat.stop()

    # -- steps ---------------------------------------------------------------------------------
    def _register(self, previous: Any, stop: threading.Event) -> Any:
        """Register (the server keeps a live lease of an unchanged document) and start its
        heartbeat; None, after a jittered backoff, if unreachable."""
        if previous is not None:
            log.warning("heartbeat stopped (%s); registering again", previous.error)
        try:
            lease = self.client.register(self.node_doc, ttl=self.ttl)
        except CcaError as exc:
            pause = self._register_backoff.next()
            log.warning("cannot register: %s; again in %.1f s", exc, pause)
            stop.wait(pause)
            return None
        self._register_backoff.reset()
        self._document_changed = False
        return self.client.heartbeat(lease, interval=self.ttl / 3)

    def _plane_moved(self) -> bool:
        """True (the document updated, to be registered again) when the node's data plane is not
        the one its document names: `--dataplane auto` fell back to nftables when the eBPF plane
        could not be set up, and `cca get nodes -o wide` must show the plane actually used."""
        if self._document_changed:  # registering it failed last time: again
            return True
        shown = self.node_doc.get("dataplane")
        plane = getattr(self.core, "dataplane", None)
        name = getattr(plane, "name", None)
        if shown is None or name is None or name == shown:
            return False
        log.info("data plane: %s, not %s: registering the node document again", name, shown)
        self.node_doc["dataplane"] = name
        self._document_changed = True
        return True

    def _watch(self, from_revision: int) -> None:
        """Start a watcher thread; events of older watchers are ignored by generation."""
        self._generation += 1
        generation = self._generation

        def pump() -> None:
            try:
                for event in self.client.watch_slice(from_revision):
                    self._events.put((generation, event))
            except CcaError as exc:
                log.warning("slice watch broke: %s", exc)
            finally:
                self._events.put((generation, None))  # the stream ended, however it ended

        threading.Thread(target=pump, name=f"cca-slice-{generation}", daemon=True).start()

    def _wait_time(self) -> float:
        """How long to wait for events: until the next tick, or the pending data-plane sync
        (a whole tick while the slice is still arriving: nothing is applied before it is complete)."""
        if not self.state.synced:
            return self.tick
        due = self._next_reconcile
        if self._services_pending:
            due = min(due, self._services_synced + SERVICE_SYNC_GAP)
        return min(self.tick, max(0.0, due - time.monotonic()))

    def _drain(self, timeout: float) -> bool:
        """Wait up to `timeout` for events and fold in all that arrived; restart a finished watch.
        True when something of this node's own changed (not only cluster-wide documents); VIP and
        endpoint changes set `_services_pending`."""
        try:
            batch = [self._events.get(timeout=timeout)] if timeout > 0 else [self._events.get_nowait()]
        except queue.Empty:
            return False
        urgent = False
        while True:
            try:
                batch.append(self._events.get_nowait())
            except queue.Empty:
                break
        for generation, event in batch:
            if generation != self._generation:
                continue
            urgent = urgent or event is None or not event["key"].startswith(LAZY_PREFIXES)
            if event is not None and event.get("key", "").startswith(SERVICE_PREFIXES):
                self._services_pending = True
            if event is None:  # resume where we were, or start over if the slice never completed
                time.sleep(self._watch_backoff.next())
                if not self.state.synced:
                    self.state.reset()
                self._watch(self.state.revision)
            elif event["kind"] == "tunnel":
                self._open_tunnel()
            elif event["kind"] == "resync":
                self.state.apply(event)
                self._watch(0)
            else:
                self.state.apply(event)
                self._watch_backoff.reset()  # the watch delivers again
        return urgent

    def _open_tunnel(self) -> None:
        """The server wants a logs/exec session here: open the tunnel (it closes again when idle)."""
        if hasattr(self.client, "tunnel") and (self._tunnel is None or not self._tunnel.alive):
            self._tunnel = AgentTunnel(self.client, self.core.runtime, linger=self.tunnel_linger,
                                       dataplane=getattr(self.core, "inspect_dataplane", None))
            self._tunnel.start(self._stop)

    def _reconcile_and_report(self) -> None:
        observed = self.core.apply(self.state.facts)
        batch = self.reporter.changes(observed)
        if not batch:
            return
        try:
            self.client.report(batch)
        except CcaError as exc:  # the next tick reports again
            if not self._moved_on(batch, exc):
                log.warning("report failed: %s", exc)
                return
        self.reporter.sent(batch)

    def _moved_on(self, batch: Mapping[str, Any], exc: CcaError) -> bool:
        """A refused batch with deletes: an instance that left this node may already be reported by
        its new node (its document is no longer ours to delete). Report the rest alone; True when
        that went through, so the deletes are dropped."""
        code = getattr(getattr(exc, "code", None), "name", None)
        puts = {k: v for k, v in batch.items() if v is not None}
        if code != "PERMISSION_DENIED" or len(puts) == len(batch):
            return False
        try:
            if puts:
                self.client.report(puts)
        except CcaError:
            return False
        log.info("dropped deletes of documents other nodes now own: %s",
                 ", ".join(k for k, v in batch.items() if v is None))
        return True
