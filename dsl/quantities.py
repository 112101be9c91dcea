"""Read the numbers of the language once, into the units facts use: millicores, bytes, milliseconds.

`5m` is 5 millicores under `cpu` and 5 minutes under `every`: the field decides which reader
applies. Each reader returns the normalised int or raises `QuantityError` with a message that
says what was expected.
"""

from __future__ import annotations

import re
from decimal import Decimal

#: Normalised quantities stay below 2^53, exact in every JSON reader.
MAX_QUANTITY = 2**53
_MAX_DIGITS = 12  # digits of a written number: 12 + the largest unit factor (16) < 28
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)([A-Za-z%]*)\Z")

_SIZE_UNITS = {
    "": 1, "K": 10**3, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
}
_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_SETS = {"weekdays": _DAYS[:5], "weekends": _DAYS[5:], "everyday": _DAYS}


class QuantityError(ValueError):
    """A value does not read as the quantity its field expects; `code` names the class of error."""

    def __init__(self, message: str, code: str = "bad-quantity"):
        super().__init__(message)
        self.code = code


def _split(text: str, what: str, example: str, code: str = "bad-quantity") -> tuple[Decimal, str]:
    if re.match(r"-\d", text):
        raise QuantityError(f"{what} must not be negative (got {text})", "negative")
    m = _NUMBER.match(text)
    if not m:
        raise QuantityError(f"malformed {what} {text!r}; expected e.g. {example}", code)
    if len(m.group(1)) > _MAX_DIGITS:
        raise QuantityError(f"{what} {text[:24]!r}… is too large", code)
    return Decimal(m.group(1)), m.group(2)


def _whole(amount: Decimal, text: str, what: str, unit: str, code: str = "bad-quantity") -> int:
    """`amount` (already scaled by its unit) as an int; its digits are few enough (`_MAX_DIGITS`)
    that Decimal's 28-digit precision keeps the product exact."""
    if amount != amount.to_integral_value():
        raise QuantityError(f"{what} {text!r} is not a whole number of {unit}", code)
    if amount > MAX_QUANTITY:
        raise QuantityError(f"{what} {text!r} is too large", code)
    return int(amount)


def cpu(text: str) -> int:
    """Millicores: `500m` → 500, `2` → 2000, `1.5` → 1500."""
    amount, unit = _split(text, "cpu", "500m, 2 or 1.5")
    if unit == "m":
        return _whole(amount, text, "cpu", "millicores")
    if unit:
        raise QuantityError(f"unknown cpu unit {unit!r} in {text!r}; use m (millicores) or none (cores)")
    return _whole(amount * 1000, text, "cpu", "millicores")


def size(text: str) -> int:
    """Bytes: `512Mi` → 536870912, `100M` → 100000000, `4096` → 4096."""
    amount, unit = _split(text, "size", "512Mi, 4Gi or 100M")
    if unit not in _SIZE_UNITS:
        hint = f"; did you mean {unit[0].upper()}i?" if unit[:1].upper() in "KMGTP" and unit else ""
        raise QuantityError(f"unknown size unit {unit!r} in {text!r} (use Ki Mi Gi Ti Pi or K M G T P){hint}")
    return _whole(amount * _SIZE_UNITS[unit], text, "size", "bytes")


def duration(text: str) -> int:
    """Milliseconds: `500ms` → 500, `10s` → 10000, `5m` → 300000, `1h` → 3600000."""
    amount, unit = _split(text, "duration", "500ms, 10s, 5m or 1h", "bad-duration")
    if not unit:
        raise QuantityError(f"duration {text!r} needs a unit: ms, s, m, h or d (e.g. {text}s)",
                            "bad-duration")
    if unit not in _DURATION_UNITS:
        raise QuantityError(f"unknown duration unit {unit!r} in {text!r}; use ms, s, m, h or d",
                            "bad-duration")
    return _whole(amount * _DURATION_UNITS[unit], text, "duration", "milliseconds", "bad-duration")


def count(text: str, what: str = "count") -> int:
    """A whole number ≥ 0."""
    if re.fullmatch(r"-\d+", text):
        raise QuantityError(f"{what} must not be negative (got {text})", "negative")
    if not re.fullmatch(r"\d+", text):
        raise QuantityError(f"{what} must be a whole number, got {text!r}", "bad-count")
    value = int(text) if len(text) <= 10 else 2**31
    if value > 2**31 - 1:
        raise QuantityError(f"{what} {text[:24]} is too large", "bad-count")
    return value


def port(text: str) -> int:
    """A TCP/UDP port, 1–65535."""
    value = count(text, "port")
    if not 1 <= value <= 65535:
        raise QuantityError(f"port {value} is outside 1–65535", "port-range")
    return value


def boolean(text: str) -> bool:
    if text in ("true", "false"):
        return text == "true"
    raise QuantityError(f"expected true or false, got {text!r}", "bad-value")


def percent_or_number(text: str) -> tuple[int | float, bool]:
    """`60` or `60%` → (60, percent?); decimals stay decimals (`0.5`)."""
    amount, unit = _split(text, "number", "60 or 60%")
    if unit not in ("", "%"):
        raise QuantityError(f"expected a number or a percentage, got {text!r}")
    value = int(amount) if amount == amount.to_integral_value() else float(amount)
    return value, unit == "%"


def clock(text: str) -> str:
    """A time of day `HH:MM` (24 h), returned as written with two-digit fields."""
    m = re.fullmatch(r"(\d{1,2}):(\d{2})", text)
    if not m or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        raise QuantityError(f"malformed time {text!r}; expected HH:MM, e.g. 08:00", "bad-time")
    return f"{int(m.group(1)):02d}:{m.group(2)}"


def days(words: list[str]) -> list[str]:
    """`weekdays`, `weekends`, `everyday` or a list of `mon`…`sun`, as sorted day names."""
    if len(words) == 1 and words[0] in DAY_SETS:
        return list(DAY_SETS[words[0]])
    unknown = [w for w in words if w not in _DAYS]
    if unknown:
        raise QuantityError(
            f"unknown day {unknown[0]!r}; use weekdays, weekends, everyday or mon,tue,…,sun", "bad-value")
    return [d for d in _DAYS if d in words]
