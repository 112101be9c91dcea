"""The slice hub's recent dispatches (engine/api/slice.py), so that a watch resumed from a revision
the hub has already passed gets the changes it missed instead of `resync` and a re-read of its
whole slice: when an API server dies, every agent resumes on another server at once, and without
this each of them re-read its slice there (a re-list storm, and a second stream per node while the
agent's old one stayed open, issue 13).

Each entry is one dispatch: its newest revision, the events routed to each node and the shared
`Fanout`, all by reference (the hub built them anyway). The history is complete for a resume from
`since` on; past `limit` events the oldest entries go and `since` moves up, so an agent that was
away longer re-reads its slice as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping

from ccattler.engine.api.slice_queue import Event, Fanout

#: Events kept (summed over the nodes they went to): a few large applies at 200–1,000 nodes.
HISTORY_EVENTS = 100_000


class SliceHistory:
    """Recent dispatches of one hub, in revision order; the hub's lock guards it."""

    def __init__(self, limit: int = HISTORY_EVENTS) -> None:
        self.limit = limit
        self._entries: deque[tuple[int, Mapping[str, list[Event]], Fanout | None, int]] = deque()
        self._events = 0
        self.since = 0  # a resume from this revision on misses nothing kept here

    def reset(self, revision: int) -> None:
        """Start over at `revision` (the hub (re)loaded its state there)."""
        self._entries.clear()
        self._events = 0
        self.since = revision

    def record(self, revision: int, own: Mapping[str, list[Event]], fanout: Fanout | None) -> None:
        """One dispatch up to `revision`: `own` the events of each node, `fanout` every node's."""
        size = sum(len(events) for events in own.values()) + (len(fanout.events) if fanout else 0)
        if not size:
            return
        self._entries.append((revision, own, fanout, size))
        self._events += size
        while self._events > self.limit and len(self._entries) > 1:
            dropped, _, _, dropped_size = self._entries.popleft()
            self._events -= dropped_size
            self.since = dropped

    def covers(self, revision: int) -> bool:
        return revision >= self.since

    def replay(self, node: str, after: int) -> Iterator[tuple[list[Event], Fanout | None]]:
        """(own events, fanout) of every dispatch that went past `after`, oldest first. A dispatch
        may also hold events at or before `after` (the agent has them): puts of the same version and
        deletes, so receiving them again changes nothing."""
        for revision, own, fanout, _ in self._entries:
            if revision > after:
                events = own.get(node, [])
                if events or fanout is not None:
                    yield events, fanout
