"""`cca logs --since`: durations back from now and RFC 3339 times, and a clear error for anything
else (before any connection is made)."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from ccattler.cli.main import app
from ccattler.cli.since import parse_since


@pytest.mark.parametrize("text,expected", [
    ("30s", (30.0, 0.0)), ("5m", (300.0, 0.0)), ("2h", (7200.0, 0.0)), ("1d", (86400.0, 0.0)),
    ("500ms", (0.5, 0.0)), ("1.5s", (1.5, 0.0)),
    ("2024-05-01T12:00:00Z", (0.0, 1714564800.0)),
    ("2024-05-01t12:00:00z", (0.0, 1714564800.0)),
    ("2024-05-01 14:00:00.25+02:00", (0.0, 1714564800.25)),
])
def test_valid(text: str, expected: tuple[float, float]) -> None:
    assert parse_since(text) == expected


@pytest.mark.parametrize("text,message", [
    ("5", "needs a unit"),
    ("5x", "unknown duration unit 'x'"),
    ("-5m", "must not be negative"),
    ("0s", "must be longer than 0"),
    ("yesterday", "is not a duration such as 30s"),
    ("", "is not a duration"),
    ("2024-05-01T12:00:00", "needs a time zone"),
    ("2024-05-01", "RFC 3339 time"),
    ("2024-13-01T12:00:00Z", "month must be in 1..12"),
])
def test_invalid(text: str, message: str) -> None:
    with pytest.raises(typer.BadParameter, match=message):
        parse_since(text)


def test_the_cli_reports_a_bad_since_without_a_traceback() -> None:
    result = CliRunner().invoke(app, ["logs", "web", "--since", "5 minutes"])
    assert result.exit_code == 2
    assert "--since" in result.output and "Traceback" not in result.output
