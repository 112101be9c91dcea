"""The two small pieces of state an agent loop keeps between API calls: the node's slice folded from
watch events (`SliceState`), and what it last reported, so each report carries only changes
(`Reporter`: changed documents, None for instances that are gone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SliceState:
    """key → document of the node's slice, from `AgentClient.watch_slice` events."""

    def __init__(self) -> None:
        self.facts: dict[str, Any] = {}
        self.synced = False
        self.revision = 0

    def apply(self, event: Mapping[str, Any]) -> bool:
        """Fold one event in; returns True when the slice is complete and changed (reconcile now).

        A `resync` event (history compacted) empties the slice: watch again from revision 0.
        """
        kind = event["kind"]
        self.revision = max(self.revision, int(event.get("revision") or 0))
        if kind == "put":
            self.facts[event["key"]] = event["value"]
        elif kind == "delete":
            self.facts.pop(event["key"], None)
        elif kind == "synced":
            self.synced = True
        elif kind == "resync":
            self.reset()
            return False
        return self.synced

    def reset(self) -> None:
        """Forget everything (before watching again from revision 0)."""
        self.facts.clear()
        self.synced, self.revision = False, 0


class Reporter:
    """Diffs successive observed snapshots into report batches."""

    def __init__(self) -> None:
        self.reported: dict[str, Any] = {}

    def changes(self, observed: Mapping[str, Any]) -> dict[str, Any | None]:
        """What to send: documents that differ from the last report, and None for vanished keys."""
        batch: dict[str, Any | None] = {k: v for k, v in observed.items() if self.reported.get(k) != v}
        batch.update({k: None for k in self.reported if k not in observed})
        return batch

    def sent(self, batch: Mapping[str, Any | None]) -> None:
        """Record a batch the server accepted."""
        for key, value in batch.items():
            if value is None:
                self.reported.pop(key, None)
            else:
                self.reported[key] = value
