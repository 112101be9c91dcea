"""The two small pieces of state an agent loop keeps between API calls: the node's slice folded from
watch events (`SliceState`), and what it last reported, so each report carries only changes
(`Reporter`: changed documents, None for instances that are gone).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class SliceFacts(dict):
    """key → document. Documents that come as JSON text (`raw`) are decoded when first read: every
    node receives every endpoint document but reads few of them, and decoding them all was ~40 % of
    a simulated agent's CPU at 200 nodes. `get` and `[]` see both kinds; iteration sees only the
    others. Reading never changes the dict itself (callers read while they iterate it).
    """

    def __init__(self) -> None:
        super().__init__()
        self.raw: dict[str, str] = {}
        self._decoded: dict[str, Any] = {}
        #: Keys put or removed since the last `take_touched` (None: everything, after `clear`).
        #: Its one reader is the data plane's StateBuilder, which then rebuilds only those.
        self._touched: set[str] | None = None

    def take_touched(self) -> set[str] | None:
        """The keys changed since the last call (None the first time and after `clear`)."""
        touched, self._touched = self._touched, set()
        return touched

    def _touch(self, key: str) -> None:
        if self._touched is not None:
            self._touched.add(key)

    def put(self, key: str, value: Any) -> None:
        self._touch(key)
        self.raw.pop(key, None)
        self._decoded.pop(key, None)
        self[key] = value

    def put_raw(self, key: str, text: str) -> None:
        self._touch(key)
        super().pop(key, None)
        self._decoded.pop(key, None)
        self.raw[key] = text

    def discard(self, key: str) -> None:
        self._touch(key)
        self.raw.pop(key, None)
        self._decoded.pop(key, None)
        super().pop(key, None)

    def clear(self) -> None:
        self._touched = None
        self.raw.clear()
        self._decoded.clear()
        super().clear()

    def __missing__(self, key: str) -> Any:
        if key not in self._decoded:
            self._decoded[key] = json.loads(self.raw[key])  # KeyError when neither has it
        return self._decoded[key]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


class SliceState:
    """key → document of the node's slice, from `AgentClient.watch_slice` events."""

    def __init__(self) -> None:
        self.facts = SliceFacts()
        self.synced = False
        self.revision = 0

    def apply(self, event: Mapping[str, Any]) -> bool:
        """Fold one event in; returns True when the slice is complete and changed (reconcile now).

        A `resync` event (history compacted) empties the slice: watch again from revision 0.
        """
        kind = event["kind"]
        self.revision = max(self.revision, int(event.get("revision") or 0))
        if kind == "put":
            if "value_json" in event:  # not decoded yet (see SliceFacts)
                self.facts.put_raw(event["key"], event["value_json"])
            else:
                self.facts.put(event["key"], event["value"])
        elif kind == "delete":
            self.facts.discard(event["key"])
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
