"""Ordered stop of stateful services: on a scale-down, ordinals go highest first, one at a time.

Ordinal k's `derived/instance` document is deleted only once every higher ordinal is gone: its
document deleted (or deleted in the same change set) and no agent holding it any more. The agent
reports `observed/instance/<t>/<inst>` for every instance placed on it and deletes that report
only after it has stopped and removed the container, so the report's absence is the signal. (Its
endpoint entry is not: the endpoint controller drops an instance as soon as its placement goes,
which follows the document's deletion at once, long before the container has stopped.) A report
from a node that is no longer registered (`observed/node/<n>` gone: its lease expired) does not
hold anything up, or a dead node would block a scale-down for ever.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ccattler.engine.facts import ServiceRef, derived_instance
from ccattler.engine.facts.keys import OBSERVED_INSTANCES, OBSERVED_NODES
from ccattler.engine.facts.snapshot import Snapshot

#: The prefixes the instance controller reads for ordered stop only.
OBSERVED = (OBSERVED_INSTANCES, OBSERVED_NODES)

_ORDINAL = re.compile(r"(0|[1-9][0-9]*)\Z")


def ordinal_of(service: str, name: str, doc: Mapping[str, Any] | None = None) -> int | None:
    """The ordinal in instance `name` of `service`, or None when it has none. With `doc`, its
    `ordinal` must agree (a stateless suffix can be all digits: `db-24567`)."""
    text = name[len(service) + 1:] if name.startswith(f"{service}-") else ""
    if not _ORDINAL.match(text):
        return None
    ordinal = int(text)
    if doc is None:
        return ordinal
    given = derived_instance.ordinal(doc)
    return ordinal if type(given) is int and given == ordinal else None


@dataclass(frozen=True, slots=True)
class StopWindow:
    """What a pending scale-down waits on: `held` is the highest ordinal at or beyond the count that
    an agent still holds (None: none), `keys` the observed facts that decided it (what to watch)."""

    held: int | None
    keys: frozenset[str] = field(compare=False)  # follow from the documents; the result does not


def stop_window(
    snapshot: Snapshot, ref: ServiceRef, total: int, ordinals: Iterable[int]
) -> StopWindow | None:
    """The state of the service's scale-down, or None when no ordinal is beyond the count.

    Walks down from one above the highest document (an ordinal deleted earlier may still be
    stopping) and stops at the first ordinal an agent holds: nothing below it can go yet, so their
    reports cannot change the result and are not read.
    """
    top = max(ordinals, default=-1)
    if top < total:
        return None
    keys: set[str] = set()
    for ordinal in range(top + 1, total - 1, -1):
        key = f"{OBSERVED_INSTANCES}{ref.tenant}/{ref.name}-{ordinal}"
        keys.add(key)
        report = snapshot.get(key)
        if not isinstance(report, Mapping):
            continue
        node = f"{OBSERVED_NODES}{report.get('node')}"
        keys.add(node)  # a node coming back (or going) changes whether its report holds the stop
        if snapshot.get(node) is not None:
            return StopWindow(ordinal, frozenset(keys))
    return StopWindow(None, frozenset(keys))


def removable(window: StopWindow, beyond: Iterable[int]) -> list[int]:
    """The ordinals beyond the count whose documents may be deleted now: the held one itself (every
    higher one is gone) and everything above it."""
    return [o for o in beyond if window.held is None or o >= window.held]
