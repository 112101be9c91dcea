"""Turns a controller's change set into guarded store transactions: domain check, batching, commit.

A change set is pruned (no-op puts and deletes of absent keys dropped), writes outside the
controller's `writes` prefixes are dropped and counted, and the rest is committed in one
transaction when it fits `max_ops`/`max_bytes`, otherwise in guarded batches that never split a
`ChangeSet.groups` group. Every batch compares the keys it changes and the inputs they were derived
from (a controller's optional `depends_on(key)`) at the revisions the snapshot read, plus the
leader key (fencing: a deposed leader's commit fails).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ccattler.engine.facts import CcaError
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot
from ccattler.engine.store.base import Compare, Store, TxnTooLarge

#: Operations per txn: small enough to keep each commit short; a lower server limit splits batches.
DEFAULT_MAX_OPS = 1000
#: Below etcd's default `--max-request-bytes` (1.5 MiB), leaving room for keys and framing.
DEFAULT_MAX_BYTES = 1024 * 1024


class GroupTooLarge(CcaError):
    """An atomic group of a change set does not fit in one transaction."""


@dataclass(frozen=True, slots=True)
class Pruned:
    """A change set reduced to real changes inside the controller's write domain."""

    changes: ChangeSet
    dropped: tuple[str, ...]  # keys outside the write domain
    noops: int  # puts of the value already stored, deletes of absent keys


def prune(changes: ChangeSet, snapshot: Snapshot, writes: Iterable[str]) -> Pruned:
    """Drop writes outside `writes` and changes that would change nothing."""
    writes = tuple(writes)
    dropped: list[str] = []
    noops = 0
    puts: dict[str, Any] = {}
    for key, value in changes.puts.items():
        if not key.startswith(writes):
            dropped.append(key)
        elif key in snapshot.values and snapshot.values[key] == value:
            noops += 1
        else:
            puts[key] = value
    deletes: set[str] = set()
    for key in changes.deletes:
        if not key.startswith(writes):
            dropped.append(key)
        elif key not in snapshot.values:
            noops += 1
        else:
            deletes.add(key)
    kept = puts.keys() | deletes
    groups = tuple(g for g in (frozenset(group & kept) for group in changes.groups) if len(g) > 1)
    return Pruned(ChangeSet(puts, frozenset(deletes), groups), tuple(sorted(dropped)), noops)


@dataclass(slots=True)
class Batch:
    """One guarded transaction."""

    puts: dict[str, Any] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    compares: dict[str, int] = field(default_factory=dict)
    units: list[_Unit] = field(default_factory=list)
    size: int = 0

    @property
    def ops(self) -> int:
        return len(self.puts) + len(self.deletes)


@dataclass(frozen=True, slots=True)
class _Unit:
    keys: tuple[str, ...]
    compares: Mapping[str, int]
    size: int


def _units(changes: ChangeSet) -> list[tuple[str, ...]]:
    """Groups merged where they share keys, plus each ungrouped key alone."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for group in changes.groups:
        first, *rest = sorted(group)
        for key in rest:
            parent[find(key)] = find(first)
    members: dict[str, list[str]] = {}
    for key in changes.puts.keys() | changes.deletes:
        members.setdefault(find(key), []).append(key)
    return [tuple(sorted(keys)) for keys in members.values()]


def plan_batches(
    changes: ChangeSet,
    snapshot: Snapshot,
    *,
    depends_on: Callable[[str], Iterable[str]] | None = None,
    fence: Compare | None = None,
    max_ops: int = DEFAULT_MAX_OPS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Batch]:
    """Pack the change set into as few guarded batches as fit, removals first, groups never split."""
    units: list[_Unit] = []
    for keys in _units(changes):
        compares: dict[str, int] = {}
        size = 0
        for key in keys:
            compares[key] = snapshot.mod_revisions.get(key, 0)
            for dep in depends_on(key) if depends_on else ():
                compares[dep] = snapshot.mod_revisions.get(dep, 0)
            size += len(key) + (_estimated_size(changes.puts[key]) if key in changes.puts else 0)
        if fence is not None:
            compares[fence.key] = fence.mod_revision
        if len(keys) > max_ops or len(compares) > max_ops or size > max_bytes:
            raise GroupTooLarge(
                f"an atomic group of {len(keys)} changes ({size} bytes, {len(compares)} guards) exceeds "
                f"one transaction ({max_ops} operations, {max_bytes} bytes): {', '.join(keys[:3])}…"
            )
        units.append(_Unit(keys, compares, size))
    # Removals first, so that whatever they free (names, addresses) is free before it is reused.
    units.sort(key=lambda u: (sum(k in changes.puts for k in u.keys) > 0, u.keys))

    batches: list[Batch] = []
    batch = Batch()
    for unit in units:
        compares = len(batch.compares) + sum(1 for key in unit.compares if key not in batch.compares)
        full = batch.ops + len(unit.keys) > max_ops or batch.size + unit.size > max_bytes
        if batch.units and (full or compares > max_ops):
            batches.append(batch)
            batch = Batch()
        _add(batch, unit, changes)
    if batch.units:
        batches.append(batch)
    return batches


def _estimated_size(value: Any) -> int:
    """About the encoded size of `value` (repr is ~3x cheaper than encoding it; the store checks the
    exact size, and `commit` splits a batch the store finds too large)."""
    return len(repr(value))


def _add(batch: Batch, unit: _Unit, changes: ChangeSet) -> None:
    batch.units.append(unit)
    batch.size += unit.size
    batch.compares.update(unit.compares)
    for key in unit.keys:
        if key in changes.puts:
            batch.puts[key] = changes.puts[key]
        else:
            batch.deletes.append(key)


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What a commit did: `conflict` means a guard failed and the rest was not attempted."""

    committed_ops: int
    transactions: int
    revision: int | None  # of the last committed batch
    conflict: bool
    written: tuple[tuple[int, tuple[str, ...]], ...] = ()  # (revision, keys) per committed batch


def commit(store: Store, batches: list[Batch], changes: ChangeSet) -> CommitResult:
    """Commit `batches` in order; stop at the first failed guard."""
    ops = txns = 0
    revision = None
    written: list[tuple[int, tuple[str, ...]]] = []
    queue = list(batches)
    while queue:
        batch = queue.pop(0)
        try:
            ok, rev = store.txn(
                [Compare(k, r) for k, r in sorted(batch.compares.items())],
                sorted(batch.puts.items()),
                sorted(batch.deletes),
            )
        except TxnTooLarge:
            if len(batch.units) < 2:
                raise
            # The server's limit is lower than ours: split the batch between units and go on.
            half = len(batch.units) // 2
            queue[:0] = [_rebatch(batch.units[:half], changes), _rebatch(batch.units[half:], changes)]
            continue
        if not ok:
            return CommitResult(ops, txns, revision, True, tuple(written))
        ops += batch.ops
        txns += 1
        revision = rev
        written.append((rev, (*batch.puts, *batch.deletes)))
    return CommitResult(ops, txns, revision, False, tuple(written))


def _rebatch(units: list[_Unit], changes: ChangeSet) -> Batch:
    batch = Batch()
    for unit in units:
        _add(batch, unit, changes)
    return batch
