"""Audit records at `audit/<time>-<request id>`: who asked for what, and what was decided.

Every security-relevant call (apply, delete, policy, secret, token, user, join, denials) writes one.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from ccattler.engine.store import Store


@dataclass(frozen=True, slots=True)
class AuditRecord:
    request_id: str
    time: float
    principal: str
    verb: str
    object: str
    decision: str  # "allowed" | "denied" | "failed"
    reason: str = ""

    @property
    def key(self) -> str:
        return f"audit/{int(self.time * 1_000_000):020d}-{self.request_id}"


def record(store: Store, entry: AuditRecord) -> None:
    store.put(entry.key, asdict(entry))


def recent(store: Store, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` records, oldest first."""
    facts, _ = store.range("audit/")
    return [f.value for f in facts[-limit:]] if limit > 0 else [f.value for f in facts]


def now() -> float:
    return time.time()
