"""A node's slice of the state, and the hub that streams it: what its agent may watch (its placements
and instance addresses, the instance documents, service specs and rollout documents (an old
instance is built from the previous spec's fields they carry) of what is placed on it, its own
firewall, condition and declared node, and the cluster-wide endpoints/VIPs/names/identity
addresses, every node's subnet and underlay address (for the overlay), the gates, service groups
and volume declarations — a volume's size and `persistent` flag), never secrets or other nodes'
placements and rules.

`SliceHub` follows the store with one watch for the whole server and routes each change to the
nodes it concerns (a thousand agents cost one store watch, and each gets only its own changes).
When a placement moves, the old node gets deletes for it (and for the service spec it no longer
needs); the new node gets the placement, the instance document and, the first time, the spec.
A resumed watch that missed changes gets them from the hub's recent dispatches
(engine/api/slice_history.py: an agent whose API server died resumes on another one without a
re-read), or, from before what is kept, `resync` — and its stream ends there: the agent re-reads
from revision 0 on a new one (left open, each such agent held two streams); `summon`
sends a `tunnel` event (the server wants a logs/exec session: the agent opens its tunnel). Each
node's stream is a `NodeQueue` (engine/api/slice_queue.py: events encoded once, the bounded queue);
`max_bytes` is the server's `watch_max_bytes`.

A node's address leaves the other nodes' slices only after `address_linger` seconds gone
(`NODE_ADDRESS_LINGER`): a node whose lease expired and that registers again at the same address
meanwhile costs no event at all, where it cost a delete and a put to every node — at 1,000 nodes
the fan-out that fed lease expiries back into more of them (docs/benchmarks.md, "1,000 idle
nodes"). A stale peer address for that long is harmless: the dead node's instances are re-placed
and addressed elsewhere by then, and nothing is routed to its subnet.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ccattler.engine.api.slice_history import SliceHistory
from ccattler.engine.api.slice_queue import BATCH, MAX_BYTES, Event, Fanout, NodeQueue
from ccattler.engine.facts.keys import (
    ADDRESSES,
    DESIRED_GATES,
    DESIRED_GROUPS,
    DESIRED_NODES,
    DESIRED_SERVICES,
    DESIRED_VOLUMES,
    DNS,
    ENDPOINTS,
    FIREWALL,
    IDENTITIES,
    INSTANCES,
    NODE_CONDITIONS,
    OBSERVED_NODES,
    PLACEMENTS,
    ROLLOUTS,
    SUBNETS,
    VIPS,
)
from ccattler.engine.store import Store

log = logging.getLogger(__name__)

#: Prefixes every node sees whole (cluster-wide routing data).
#: Every node's subnet is shared too: the overlay routes to each peer's subnet (agent/net/overlay.py).
#: Nodes' observed documents, shared as `{"address": …}` only (the overlay's peer underlay address):
#: never their usage or labels, and no event on a heartbeat that leaves the address unchanged.
#: Gates too: every node's proxy serves every gate (agent/gates/).
#: Service groups too: a node pairs `share network` members into seats and mounts shared volumes.
#: Names too: every node's resolver answers every service's name (agent/dns/).
#: Identities' addresses too: a node's firewall names sources running anywhere (agent/dataplane/).
_SHARED = (ENDPOINTS, VIPS, DNS, DESIRED_VOLUMES, DESIRED_GATES,
           DESIRED_GROUPS, SUBNETS, OBSERVED_NODES, IDENTITIES)
#: Per service, routed like the service document: to the nodes its instances are placed on.
_PER_SERVICE = (DESIRED_SERVICES, ROLLOUTS)
_OWN = (FIREWALL, NODE_CONDITIONS, DESIRED_NODES)
_ROUTED = (PLACEMENTS, ADDRESSES, INSTANCES, DESIRED_SERVICES, ROLLOUTS, *_SHARED, *_OWN)
#: Seconds a vanished node's address stays in every slice before its delete is sent (the default
#: node lease TTL: an agent that lost its lease re-registers well within it).
NODE_ADDRESS_LINGER = 15.0
#: The least time between two dispatches: changes arriving sooner wait and go out together, so a
#: storm (a thousand registrations) is at most 10 messages a second per node, not one per commit;
#: a lone change after a quiet spell goes out at once.
DISPATCH_GAP = 0.1


def _resync(batch: list[Event]) -> bool:
    return any(event.kind == "resync" for event in batch)


def _instance_of(key: str) -> str:
    """"tenant/instance" of a placement, address or instance key."""
    parts = key.split("/")
    return f"{parts[-3] if key.startswith(INSTANCES) else parts[-2]}/{parts[-1]}"


class SliceHub:
    """Routes store changes to per-node subscribers; starts its watch on the first subscription."""

    def __init__(self, store: Store, max_bytes: int = MAX_BYTES,
                 address_linger: float = NODE_ADDRESS_LINGER) -> None:
        self.store, self.max_bytes, self.address_linger = store, max_bytes, address_linger
        self._lock = threading.Lock()
        self._subs: dict[str, set[NodeQueue]] = defaultdict(set)
        self._thread: threading.Thread | None = None
        self._watch: Any = None
        self._subscribing = ThreadPoolExecutor(1, thread_name_prefix="cca-slice-subscribe")
        self._history = SliceHistory()
        self._reset_state()

    def _reset_state(self) -> None:
        self.revision = 0
        self._docs: dict[str, Any] = {}  # routed keys → documents
        self._json: dict[str, str] = {}  # routed keys → their documents as JSON (when asked once)
        self._puts: dict[str, Event] = {}  # routed keys → the put event of their current version
        self._node_of: dict[str, str] = {}  # tenant/instance → node (placement)
        self._on_node: dict[str, set[str]] = defaultdict(set)  # node → placement keys
        self._ips_on: dict[str, set[str]] = defaultdict(set)  # node → address keys
        self._instance_key: dict[str, str] = {}  # tenant/instance → derived/instance key
        self._service_nodes: dict[str, Counter[str]] = defaultdict(Counter)  # service → node → count
        self._gone: dict[str, float] = {}  # node address keys deleted in the store → when to send it

    # -- subscribing ---------------------------------------------------------------------------
    def stream(self, node: str, from_revision: int, active: Callable[[], bool]) -> Iterator[Event]:
        """Events of `node`'s slice after `from_revision`; with 0, the current slice as puts first."""
        for batch in self.batches(node, from_revision, active, 1):
            yield from batch

    def batches(self, node: str, from_revision: int, active: Callable[[], bool], limit: int = BATCH
                ) -> Iterator[list[Event]]:
        """The same events in lists of up to `limit`: whatever is queued when the consumer asks."""
        sub = NodeQueue(node, self.max_bytes)
        self._subscribe(sub, from_revision)
        try:
            while active():
                batch = sub.get(1.0, limit)
                if batch:
                    yield batch
                    if _resync(batch):
                        return
        finally:
            self._unsubscribe(sub)

    async def abatches(self, node: str, from_revision: int, limit: int = BATCH
                       ) -> AsyncIterator[list[Event]]:
        """`batches` for a coroutine: it holds no thread while the node's slice is quiet, and ends
        when its consumer is cancelled (the stream closed)."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()

        def wake() -> None:  # from the hub's thread
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # the loop closed (server stopped): nobody is waiting
                pass

        sub = NodeQueue(node, self.max_bytes, wake)
        # The first subscription reads the whole store, each builds the node's slice: not on the
        # event loop, and one at a time on their own thread (they take the hub's lock anyway), so
        # a thousand nodes connecting at once do not queue ahead of other blocking work.
        await loop.run_in_executor(self._subscribing, self._subscribe, sub, from_revision)
        try:
            while True:
                batch = sub.take(limit)
                if batch:
                    yield batch
                    if _resync(batch):
                        return  # the agent re-reads on a new stream: this one would stay open unread
                    continue
                await ready.wait()
                ready.clear()
        finally:
            self._unsubscribe(sub)

    def _subscribe(self, sub: NodeQueue, from_revision: int) -> None:
        sub.delivered = max(0, from_revision)
        with self._lock:
            self._start()
            if from_revision <= 0:
                sub.push([*self._current(sub.node), Event("synced", "", None, self.revision)], counted=False)
            elif from_revision < self.revision and self._history.covers(from_revision):
                # Another server's agent failing over: what it missed, not its whole slice again
                # (exempt from the byte bound like an initial slice: the hub's own objects).
                for events, fanout in self._history.replay(sub.node, from_revision):
                    sub.push(events, fanout, counted=False)
            elif from_revision < self.revision:  # from before what the history keeps
                sub.push([Event("resync", "", None, self.revision)])
            self._subs[sub.node].add(sub)

    def start(self) -> None:
        """Follow the store now rather than on the first subscription, so that the history covers
        the revisions agents of another server may resume from (engine/api/slice_history.py)."""
        with self._lock:
            self._start()

    def _unsubscribe(self, sub: NodeQueue) -> None:
        with self._lock:
            self._subs[sub.node].discard(sub)

    def summon(self, node: str) -> None:
        """Ask `node`'s agent to open its logs/exec tunnel (a `tunnel` event in its slice stream)."""
        with self._lock:
            subscribers = list(self._subs.get(node, ()))
            revision = self.revision
        for sub in subscribers:
            sub.push([Event("tunnel", "", None, revision)])

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._subscribing.shutdown(wait=False, cancel_futures=True)

    def _start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._load()
        self._thread = threading.Thread(target=self._follow, name="cca-slice-hub", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        """(Re)build the routing state from one consistent read; the watch continues from it."""
        facts, revision = self.store.range("")
        self._reset_state()
        for fact in facts:
            if fact.key.startswith(_ROUTED):
                self._route(fact.key, fact.value)
        self.revision = revision
        self._history.reset(revision)
        self._watch = self.store.watch("", revision)

    def _current(self, node: str) -> list[Event]:
        keys = set(self._on_node.get(node, ())) | set(self._ips_on.get(node, ()))
        keys |= {self._instance_key[i] for i in (_instance_of(k) for k in self._on_node.get(node, ()))
                 if i in self._instance_key}
        keys |= {f"{p}{s}" for s, nodes in self._service_nodes.items() if nodes.get(node)
                 for p in _PER_SERVICE}
        keys |= {f"{p}{node}" for p in _OWN}
        keys |= {k for k in self._docs if k.startswith(_SHARED)}
        return [self._put(k, self.revision) for k in sorted(keys) if k in self._docs]

    def _put(self, key: str, revision: int) -> Event:
        """A put of the current document of `key`: one event per version (its JSON and wire form
        encoded once), reused by every node's initial slice — a thousand nodes connecting at once
        each get the same thousand node-address events, not a thousand new ones. Its revision is
        the change's (or, never changed since loaded, the first asker's), at most the hub's."""
        event = self._puts.get(key)
        if event is None:
            encoded = self._json.get(key)
            if encoded is None:
                encoded = self._json[key] = json.dumps(self._docs[key])
            event = self._puts[key] = Event("put", key, self._docs[key], revision, encoded)
        return event

    # -- following the store -------------------------------------------------------------------
    def _follow(self) -> None:
        watch = self._watch
        self._dispatched = 0.0
        while not watch.cancelled:
            event = watch.get(timeout=1.0)
            if event is None and not self._gone:
                continue
            gather = self._dispatched + DISPATCH_GAP - time.monotonic()
            if gather > 0:
                time.sleep(gather)
            batch = [event] if event is not None else []
            while (more := watch.get(timeout=0)) is not None:
                batch.append(more)
            self._dispatched = time.monotonic()
            with self._lock:
                self._dispatch(batch)
                if self._watch is not watch:  # reloaded after a resync
                    watch.cancel()
                    watch = self._watch

    def _dispatch(self, batch: list[Event]) -> None:
        out: dict[str, list[Event]] = defaultdict(list)
        shared: list[Event] = []  # for every node: one `Fanout`
        for event in batch:
            if event.kind == "resync":
                log.warning("slice hub: store history compacted; every agent re-reads its slice")
                self._load()
                out.clear()
                shared.clear()
                for node in self._subs:
                    out[node] = [Event("resync", "", None, self.revision)]
                self._push(out, None)
                return
            self.revision = max(self.revision, event.revision)
            if event.key.startswith(_ROUTED):
                made: dict[tuple[str, str], Event] = {}  # one event object per change, shared
                for node, kind, key, _ in self._route(event.key, event.value):
                    if (kind, key) not in made:
                        made[kind, key] = (self._put(key, event.revision) if kind == "put"
                                           else Event("delete", key, None, event.revision))
                        if node is None:
                            shared.append(made[kind, key])
                    if node is not None:
                        out[node].append(made[kind, key])
        now = time.monotonic()
        for key in [k for k, due in self._gone.items() if due <= now]:  # gone long enough: say so
            del self._gone[key]
            if self._route(key, None, linger=False):
                shared.append(Event("delete", key, None, self.revision))
        fanout = Fanout(shared) if shared else None
        self._history.record(self.revision, out, fanout)
        self._push(out, fanout)

    def _push(self, out: dict[str, list[Event]], fanout: Fanout | None) -> None:
        for node, subs in self._subs.items():
            events = out.get(node, [])
            if events or fanout is not None:
                for sub in subs:
                    sub.push(events, fanout)

    def _route(self, key: str, value: Any, linger: bool = True) -> list[tuple[str | None, str, str, Any]]:
        """Record one change; the (node, kind, key, value) events it makes (node None: every node).
        A node address's delete waits `address_linger` (unless `linger` is False: it is due)."""
        if key.startswith(OBSERVED_NODES):
            address = value.get("address") if isinstance(value, dict) else None
            value = {"address": address} if isinstance(address, str) and address else None
            if value is None and linger and self.address_linger > 0 and key in self._docs:
                self._gone.setdefault(key, time.monotonic() + self.address_linger)
                return []  # kept for now: the node may be back at the same address
            self._gone.pop(key, None)
            if self._docs.get(key) == value:
                return []  # a heartbeat, back at the same address, or still no address
        old = self._docs.get(key)
        self._json.pop(key, None)
        self._puts.pop(key, None)
        if value is None:
            self._docs.pop(key, None)
        else:
            self._docs[key] = value
        kind = "put" if value is not None else "delete"
        if key.startswith(PLACEMENTS):
            return self._placement(key, old, value)
        if key.startswith(ADDRESSES):
            return self._address(key, old, value)
        if key.startswith(INSTANCES):
            instance = _instance_of(key)
            if value is None:
                self._instance_key.pop(instance, None)
            else:
                self._instance_key[instance] = key
            node = self._node_of.get(instance)
            return [(node, kind, key, value)] if node else []
        if key.startswith(_PER_SERVICE):
            service = key[len(DESIRED_SERVICES if key.startswith(DESIRED_SERVICES) else ROLLOUTS):]
            return [(node, kind, key, value) for node, n in self._service_nodes.get(service, {}).items() if n]
        if key.startswith(_SHARED):
            return [(None, kind, key, value)]  # every node: `_dispatch` fans it out once
        return [(key.rsplit("/", 1)[1], kind, key, value)]  # a node's own subnet, firewall, condition

    def _placement(self, key: str, old: Any, new: Any) -> list[tuple[str, str, str, Any]]:
        instance = _instance_of(key)
        before = (old or {}).get("node")
        after = (new or {}).get("node")
        events: list[tuple[str, str, str, Any]] = []
        if before and before != after:
            self._on_node[before].discard(key)
            self._node_of.pop(instance, None)
            events.append((before, "delete", key, None))
            if instance in self._instance_key:
                events.append((before, "delete", self._instance_key[instance], None))
            events += self._unref(old.get("service"), before)
        if after:
            self._on_node[after].add(key)
            self._node_of[instance] = after
            events.append((after, "put", key, new))
            if before != after:
                events += self._ref(new.get("service"), after)
                if instance in self._instance_key:
                    ikey = self._instance_key[instance]
                    events.append((after, "put", ikey, self._docs[ikey]))
        return events

    def _address(self, key: str, old: Any, new: Any) -> list[tuple[str, str, str, Any]]:
        before = (old or {}).get("node")
        after = (new or {}).get("node")
        events: list[tuple[str, str, str, Any]] = []
        if before and before != after:
            self._ips_on[before].discard(key)
            events.append((before, "delete", key, None))
        if after:
            self._ips_on[after].add(key)
            events.append((after, "put", key, new))
        return events

    def _ref(self, service: str | None, node: str) -> list[tuple[str, str, str, Any]]:
        if not service:
            return []
        counts = self._service_nodes[service]
        counts[node] += 1
        if counts[node] != 1:
            return []
        keys = (f"{prefix}{service}" for prefix in _PER_SERVICE)
        return [(node, "put", key, self._docs[key]) for key in keys if key in self._docs]

    def _unref(self, service: str | None, node: str) -> list[tuple[str, str, str, Any]]:
        if not service or not self._service_nodes[service].get(node):
            return []
        counts = self._service_nodes[service]
        counts[node] -= 1
        if counts[node]:
            return []
        del counts[node]
        keys = (f"{prefix}{service}" for prefix in _PER_SERVICE)
        return [(node, "delete", key, None) for key in keys if key in self._docs]
