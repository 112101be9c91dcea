"""Checks every request message passes before a servicer sees it, so a wrong input is
INVALID_ARGUMENT naming the field, never a crash deeper in (`check_request`), and JSON from
agents and clients is parsed with bounded depth and without NaN/Infinity (`load_object`).

What is checked, for every message type (generated code is not touched):
- a message made only of fields this server does not know is refused (a typo'd or foreign client);
- no string field holds a NUL byte (paths, names and documents never do; C code truncates at it);
- repeated fields hold at most `MAX_REPEATED[field]` (else `DEFAULT_MAX_REPEATED`) elements;
- doubles are finite; `ttl_seconds` and `since_*` are ≥ 0; metric values within ±`MAX_METRIC`;
- revisions, leases, limits and tails are ≥ 0.
"""

from __future__ import annotations

import json
import math
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from ccattler.dsl.limits import MAX_FROM_FILES, MAX_SOURCES
from ccattler.engine.api.errors import BadRequest

DEFAULT_MAX_REPEATED = 10_000
MAX_REPEATED = {"sources": MAX_SOURCES, "files": MAX_FROM_FILES, "groups": 64, "command": 1_000,
                "tags": 64, "instances": 1_000, "observations": 10_000}
MAX_METRIC = 1e15
MAX_JSON_DEPTH = 64
_NON_NEGATIVE = {"from_revision", "lease", "limit", "tail", "ttl_seconds", "since_seconds",
                 "since_time", "session"}


def check_request(message: Message, where: str = "") -> None:
    """Raise `BadRequest` naming the field when `message` breaks one of the rules above."""
    name = where or type(message).__name__
    present = message.ListFields()
    if not where and not present and len(UnknownFieldSet(message)):
        raise BadRequest(f"{name} carries only fields this server does not know "
                         f"(numbers {sorted({f.field_number for f in UnknownFieldSet(message)})})")
    for field, value in present:
        path = f"{name}.{field.name}"
        if field.is_repeated:
            cap = MAX_REPEATED.get(field.name, DEFAULT_MAX_REPEATED)
            if len(value) > cap:
                raise BadRequest(f"{path} has {len(value)} entries; at most {cap} are allowed")
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                for k, v in value.items():
                    _check_scalar(f"{path}[{k!r}]", field.message_type.fields_by_name["value"], v)
                    _check_scalar(f"{path} key", field.message_type.fields_by_name["key"], k)
                continue
            for i, item in enumerate(value):
                _check_value(f"{path}[{i}]", field, item)
        else:
            _check_value(path, field, value)


def _check_value(path: str, field: FieldDescriptor, value: Any) -> None:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        check_request(value, path)
    else:
        _check_scalar(path, field, value)


def _check_scalar(path: str, field: FieldDescriptor, value: Any) -> None:
    if isinstance(value, str):
        if "\x00" in value:
            raise BadRequest(f"{path} contains a NUL byte")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise BadRequest(f"{path} must be a finite number, got {value}")
        if path.endswith(".value") and abs(value) > MAX_METRIC:
            raise BadRequest(f"{path} {value:g} is outside ±{MAX_METRIC:g}")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and field.name in _NON_NEGATIVE \
            and value < 0:
        raise BadRequest(f"{path} must not be negative, got {value}")


def load_object(text: str, what: str) -> dict[str, Any]:
    """A JSON object from a request: bounded nesting, no NaN/Infinity, numbers within float range."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise BadRequest(f"{what} is nested too deeply (the limit is {MAX_JSON_DEPTH} levels)") from None
    except ValueError as exc:
        raise BadRequest(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadRequest(f"{what} must be a JSON object")
    if _depth(value) > MAX_JSON_DEPTH:
        raise BadRequest(f"{what} is nested too deeply (the limit is {MAX_JSON_DEPTH} levels)")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:30]} is out of range")
    return value


def _depth(value: Any) -> int:
    """Nesting depth, iteratively (a recursive walk is what the limit protects against)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                return depth
            todo.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest
