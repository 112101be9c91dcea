"""`cca describe instance` shows the volumes its agent reports: usage against the size, and whether
the size is enforced."""

from __future__ import annotations

from ccattler.cli import render


def test_describe_shows_volume_usage(capsys) -> None:  # noqa: ANN001
    row = {"key": "derived/instance/default/db/db-0", "name": "db-0", "tenant": "default", "state": "running",
           "volumes": [{"name": "default/data/db-0", "path": "/data", "size": 64 << 20, "used": 3 << 20,
                        "enforced": True},
                       {"name": "default/logs", "path": "/logs", "size": 1 << 20, "used": 2 << 20,
                        "enforced": False},
                       {"name": "default/tmp", "path": "/tmp", "size": None, "used": None,
                        "enforced": False}],
           "value": {"service": "default/db"}}
    render.describe("instances", row)
    out = capsys.readouterr().out
    assert "Volumes:\n  default/data/db-0 at /data: 3Mi used of 64Mi (enforced)\n" in out
    assert "  default/logs at /logs: 2Mi used of 1Mi (not enforced; OVER ITS SIZE)\n" in out
    assert "  default/tmp at /tmp: - used (no size)\n" in out
