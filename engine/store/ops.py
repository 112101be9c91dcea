"""Checks shared by every backend: txn operations validated and encoded once, prefix bounds."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ccattler.engine.facts import check_key, check_value
from ccattler.engine.store.base import Compare, StoreError, TxnTooLarge

#: Our own limits for one transaction; the etcd that CCattler starts uses the same numbers.
MAX_TXN_OPS = 10_000
MAX_TXN_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TxnOps:
    """A transaction's checked parts: values already encoded as canonical JSON bytes."""

    compares: tuple[Compare, ...]
    puts: tuple[tuple[str, bytes], ...]
    deletes: tuple[str, ...]


def prepare_txn(
    compares: Iterable[Compare],
    puts: Mapping[str, Any] | Iterable[tuple[str, Any]],
    deletes: Iterable[str],
    max_ops: int | None = MAX_TXN_OPS,
    max_bytes: int | None = MAX_TXN_BYTES,
) -> TxnOps:
    """Check every key and value, refuse a key written twice, and enforce the size limits."""
    items = puts.items() if isinstance(puts, Mapping) else puts
    checked_puts = tuple((check_key(key), check_value(value)) for key, value in items)
    checked_deletes = tuple(check_key(key) for key in deletes)
    checked_compares = tuple(compares)
    for compare in checked_compares:
        if not isinstance(compare, Compare):
            raise StoreError(f"txn compares must be Compare(key, mod_revision), got {compare!r}")
        check_key(compare.key)
        if type(compare.mod_revision) is not int or compare.mod_revision < 0:
            raise StoreError(f"compare on {compare.key!r}: mod_revision must be an integer ≥ 0 (0 = absent), "
                             f"got {compare.mod_revision!r}")
    seen: set[str] = set()
    for key in [key for key, _ in checked_puts] + list(checked_deletes):
        if key in seen:
            raise StoreError(f"key {key!r} is written twice in one txn")
        seen.add(key)
    if max_ops is not None and max(len(seen), len(checked_compares)) > max_ops:
        raise TxnTooLarge(
            f"txn has {len(seen)} writes and {len(checked_compares)} compares; "
            f"the limit is {max_ops} operations per txn (max_txn_ops)"
        )
    if max_bytes is not None:
        size = sum(len(key.encode()) + len(data) for key, data in checked_puts)
        size += sum(len(key.encode()) for key in checked_deletes)
        if size > max_bytes:
            raise TxnTooLarge(f"txn carries {size} bytes; the limit is {max_bytes} bytes (max_txn_bytes)")
    return TxnOps(checked_compares, checked_puts, checked_deletes)


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string starting with `prefix` (None: no bound)."""
    stripped = prefix.rstrip("\U0010ffff")
    if not stripped:
        return None
    following = ord(stripped[-1]) + 1
    if 0xD800 <= following < 0xE000:  # surrogates cannot be stored; skip past them
        following = 0xE000
    return stripped[:-1] + chr(following)


def decode(data: bytes | None) -> Any:
    """A stored value back as a JSON document (None stays None: absent or deleted)."""
    return None if data is None else json.loads(data)
