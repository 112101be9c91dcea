"""One node's WatchSlice stream below the hub (engine/api/slice.py): its events, encoded once for
every node that receives them (`Event.wire`, a cluster-wide change as one shared `Fanout`), and its
bounded queue (`NodeQueue`): past `MAX_PENDING` events or `max_bytes` queued beyond the initial
slice the node is dropped (`FellBehind`: its agent resumes and re-reads its slice). `BATCH` is the
most events sent in one message.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ccattler.engine.api.errors import FellBehind
from ccattler.engine.api.gen.ccattler.v1 import api_pb2

MAX_PENDING = 100_000
MAX_BYTES = 8 * 1024 * 1024
#: What an event costs besides its key and document (its objects, its wire form).
_OVERHEAD = 128
#: Events per WatchSlice message at most (one gRPC message costs far more than one event in it).
BATCH = 1_000


@dataclass(slots=True, eq=False)
class Event:
    """One event of a node's slice; its JSON and its wire form are encoded once, however many
    nodes receive it (at 200 nodes, building a protobuf message per node per event was a fifth of
    the server's CPU)."""

    kind: str
    key: str
    value: Any
    revision: int
    value_json: str = ""
    _wire: bytes | None = None

    def wire(self) -> bytes:
        """This event as one entry of a batch `Event`'s `events` field (tag, length, message)."""
        if self._wire is None:
            body = api_pb2.Event(kind=self.kind, key=self.key, revision=self.revision,
                                 value_json=self.value_json).SerializeToString()
            self._wire = _EVENTS_TAG + _varint(len(body)) + body
        return self._wire


class SliceBatch(list):
    """The events of one WatchSlice message, with their wire form in parts: a cluster-wide change
    is one `Fanout` whose encoding every node's message reuses."""

    __slots__ = ("parts",)


class Fanout:
    """The cluster-wide events of one dispatch (one store revision batch), built once and queued
    by reference to every subscriber: endpoint, VIP, DNS and subnet changes cost each node one
    queue entry, not one per event. A key changed twice in the batch is sent once, as it ended."""

    __slots__ = ("events", "keys", "size", "_wire")

    def __init__(self, events: list[Event]) -> None:
        last = {event.key: i for i, event in enumerate(events)}
        self.events = [event for i, event in enumerate(events) if last[event.key] == i]
        self.keys = frozenset(last)
        self.size = sum(_size(event) for event in self.events)  # what it counts against a queue's bound
        self._wire: bytes | None = None

    def wire(self) -> bytes:
        if self._wire is None:
            self._wire = b"".join(event.wire() for event in self.events)
        return self._wire


def batch_message(events: list[Event]) -> bytes:
    """A serialized `Event(kind="batch", events=…)` of `events`, concatenated from their wire forms."""
    parts = getattr(events, "parts", None)
    if parts is None:
        parts = [event.wire() for event in events]
    return _BATCH_KIND + b"".join(parts)


_EVENTS_TAG = bytes([5 << 3 | 2])  # field 5 (`events`), length-delimited
_BATCH_KIND = api_pb2.Event(kind="batch").SerializeToString()


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class NodeQueue:
    """One WatchSlice stream's queue: its own events and, by reference, the cluster-wide
    `Fanout`s. A cluster-wide document (an endpoint list) changed again before its earlier
    version was sent is sent once, in its latest version: a node that falls behind catches up on
    state, not on every step of it. Queued bytes are bounded (the initial slice aside: it is the
    hub's own documents); past the bound, or past `MAX_PENDING` events, the subscriber is dropped
    (`FellBehind`: its agent resumes and re-reads its slice). `wake` (a coroutine's
    subscription) is called from the hub's thread when events arrive for a consumer that has
    drained the queue."""

    def __init__(self, node: str, max_bytes: int = MAX_BYTES, wake: Callable[[], None] | None = None) -> None:
        self.node, self.max_bytes = node, max_bytes
        self.items: deque[Event | Fanout] = deque()
        self.count = 0  # events queued
        self.queued_bytes = 0
        self.exempt = 0  # leading items not counted in bytes (the initial slice)
        self.delivered = 0  # the newest revision handed out
        self.dropped: FellBehind | None = None
        self.cond = threading.Condition(threading.Lock())
        self._wake = wake
        self._woken = False  # a wake is on its way: no second one until the consumer drains

    def push(self, events: list[Event], fanout: Fanout | None = None, counted: bool = True) -> None:
        with self.cond:
            if self.dropped is not None:
                return
            added = len(events) + (len(fanout.events) if fanout is not None else 0)
            size = 0
            if counted:
                size = sum(_size(e) for e in events) + (fanout.size if fanout is not None else 0)
            if self.items and (self.count + added > MAX_PENDING or self.queued_bytes + size > self.max_bytes):
                self.dropped = FellBehind(self.delivered, self.queued_bytes + size, self.max_bytes)
                self.items.clear()
                self.count = self.queued_bytes = self.exempt = 0
            else:
                self.items.extend(events)
                if fanout is not None:
                    self.items.append(fanout)
                self.count += added
                self.queued_bytes += size
                if not counted:
                    self.exempt += len(events) + (fanout is not None)
            self.cond.notify_all()
            wake, self._woken = (self._wake and not self._woken), True
        if wake:
            self._wake()

    def get(self, timeout: float, limit: int = 1) -> SliceBatch:
        """Up to about `limit` queued events, waiting up to `timeout` for the first; raises
        `FellBehind` once the subscriber was dropped."""
        with self.cond:
            if not self.items and self.dropped is None:
                self.cond.wait(timeout)
            return self._take(limit)

    def take(self, limit: int) -> SliceBatch:
        """Up to about `limit` queued events, without waiting (an empty batch re-arms `wake`)."""
        with self.cond:
            return self._take(limit)

    def _take(self, limit: int) -> SliceBatch:
        if self.dropped is not None:
            raise self.dropped
        taken: list[Event | Fanout] = []
        size = 0
        while self.items and size < limit:  # a fanout is taken whole
            item = self.items.popleft()
            taken.append(item)
            size += len(item.events) if isinstance(item, Fanout) else 1
            if self.exempt:
                self.exempt -= 1
            else:
                self.queued_bytes -= item.size if isinstance(item, Fanout) else _size(item)
        self.count -= size
        if not self.items:
            self._woken = False
        # Newest first: a shared key already seen (later in the queue) supersedes this version.
        later: set[str] = set()
        for item in self.items:  # only a subscriber that lags has any left
            if isinstance(item, Fanout):
                later |= item.keys
        events: list[Event] = []
        parts: list[bytes] = []
        fanouts = sum(isinstance(item, Fanout) for item in taken)
        for item in reversed(taken):
            if isinstance(item, Fanout):
                fanouts -= 1
                if later.isdisjoint(item.keys):
                    events.extend(reversed(item.events))
                    parts.append(item.wire())  # the common case: encoded once for every node
                else:
                    for event in reversed(item.events):
                        if event.key not in later:
                            events.append(event)
                            parts.append(event.wire())
                if fanouts:
                    later |= item.keys
            else:
                events.append(item)
                parts.append(item.wire())
        events.reverse()
        parts.reverse()
        batch = SliceBatch(events)
        batch.parts = parts
        if events:
            self.delivered = max(self.delivered, max(e.revision for e in events))
        return batch


def _size(event: Event) -> int:
    return _OVERHEAD + len(event.key) + len(event.value_json)
