"""What every controller is: a pure function from a snapshot of facts to a change set.

A controller declares the prefixes it reads and the prefixes it writes; the runner gives it a
`Snapshot` of its read prefixes and commits its `ChangeSet` guarded by the revisions it read,
dropping (and counting) writes outside `writes`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Protocol


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Facts at one revision: key → value, plus each key's mod_revision (for guards)."""

    revision: int
    values: Mapping[str, Any]
    mod_revisions: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def under(self, prefix: str) -> Iterator[tuple[str, Any]]:
        """(key, value) pairs under `prefix`, in key order."""
        for key in sorted(k for k in self.values if k.startswith(prefix)):
            yield key, self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def changed_keys(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Keys whose value differs between two snapshots' values, by identity: the runner's cache
    hands out the same object until a key is written, so this is one cheap pass, not a deep compare."""
    changed, added = [], 0
    for key, value in after.items():
        old = before.get(key, _ABSENT)
        if old is not value:
            changed.append(key)
            added += old is _ABSENT
    if len(before) > len(after) - added:  # some keys are gone
        changed += [key for key in before if key not in after]
    return changed


_ABSENT = object()


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Puts and deletes a controller wants. `groups` lists key sets that must commit together
    (e.g. stop-and-replace); the runner never splits a group across transactions."""

    puts: Mapping[str, Any] = field(default_factory=dict)
    deletes: frozenset[str] = frozenset()
    groups: tuple[frozenset[str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.puts or self.deletes)

    def __len__(self) -> int:
        return len(self.puts) + len(self.deletes)


class Controller(Protocol):
    """A pure reconcile function with its read and write domains.

    Optional: `depends_on(key) -> keys` (the inputs a written key derives from: commit guards) and
    `wakes_on(key, *change) -> bool` (the live runner skips a change under `reads` for which it
    says False; `change` is (old value, new value) when the watch knows them, empty after a
    re-list; it must say True for every change that could alter the result, and be cheap and
    thread-safe: watch threads call it), `timeless = True` (its changes depend on the snapshot
    alone, never on `now`: the live runner's periodic resync runs it rarely, engine/runner/loop.py)
    and `next_due()` (when a decision changes with time alone).
    """

    name: ClassVar[str]
    reads: ClassVar[tuple[str, ...]]
    writes: ClassVar[tuple[str, ...]]

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet: ...
