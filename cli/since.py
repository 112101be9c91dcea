"""`cca logs --since`: a duration back from now (`30s`, `5m`, `2h`, `1d`, the language's units) or an
RFC 3339 time (`2024-05-01T12:00:00Z`, `2024-05-01 14:00:00.5+02:00`)."""

from __future__ import annotations

import re
from datetime import datetime

import typer

from ccattler.dsl.quantities import QuantityError, duration

_EXAMPLES = "a duration such as 30s, 5m or 2h, or an RFC 3339 time such as 2024-05-01T12:00:00Z"


def parse_since(text: str) -> tuple[float, float]:
    """(seconds back from now, 0) for a duration, (0, unix time) for a time; a clear
    `BadParameter` otherwise."""
    text = text.strip()
    if re.fullmatch(r"-?\d+(\.\d+)?[A-Za-z]*", text):  # reads as a duration (or tries to)
        try:
            milliseconds = duration(text)
        except QuantityError as exc:
            raise typer.BadParameter(str(exc)) from None
        if milliseconds <= 0:
            raise typer.BadParameter(f"{text!r} must be longer than 0")
        return milliseconds / 1000, 0.0
    if not re.fullmatch(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)", text):
        zoneless = re.fullmatch(r"\d{4}-\d\d-\d\d[Tt ][\d:.]+", text)
        hint = " (it needs a time zone: Z or +hh:mm)" if zoneless else ""
        raise typer.BadParameter(f"{text!r} is not {_EXAMPLES}{hint}")
    try:
        moment = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError as exc:  # a month 13, an hour 25
        raise typer.BadParameter(f"{text!r}: {exc}") from None
    return 0.0, max(moment.timestamp(), 1e-3)  # 0 would mean "everything"
