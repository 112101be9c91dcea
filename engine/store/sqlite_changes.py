"""The SQLite change log's row format: one JSON array per revision, built without re-encoding values.

Each change is `[key, value, create_rev, version, lease, prev_value, prev_create, prev_mod,
prev_version, prev_lease]`; `value` null is a delete, `prev_value` null means the key was absent.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring

from ccattler.engine.store.base import Event, Fact

_NULL = b"null"
_ABSENT = b"null,null,null,null,null"


def _number(value: int | None) -> bytes:
    return _NULL if value is None else b"%d" % value


def encode_changes(changes: list[tuple]) -> bytes:
    """`(key, data, create, version, lease, prev_kv_row)` tuples → one JSON array (values embedded as-is)."""
    parts = []
    for key, data, create, version, lease, prev in changes:
        tail = (
            _ABSENT
            if prev is None
            else b"%b,%d,%d,%d,%b" % (prev[1], prev[2], prev[3], prev[4], _number(prev[5]))
        )
        parts.append(
            b"[%b,%b,%b,%b,%b,%b]"
            % (
                encode_basestring(key).encode(),
                data or _NULL,
                _number(create),
                _number(version),
                _number(lease),
                tail,
            )
        )
    return b"[" + b",".join(parts) + b"]"


def decode_changes(blob: bytes) -> list[list]:
    return json.loads(blob)


def change_event(change: list, revision: int) -> Event:
    key, value, prev_value = change[0], change[1], change[5]
    return Event("delete" if value is None else "put", key, value, revision, prev_value)


def previous_fact(change: list) -> Fact | None:
    """The key's fact just before this change (None: it was absent)."""
    if change[5] is None:
        return None
    return Fact(change[0], change[5], change[6], change[7], change[8], change[9])
