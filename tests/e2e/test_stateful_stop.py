"""Ordered stop on `cca up` with real runc: scaling a stateful service 3 → 1 stops db-2 completely
(its container has exited) before db-1 is even asked to stop. Each container notes in its own
volume when it got SIGTERM and when it exited (the host's uptime: one clock for all of them), and
takes 2 s to stop, so stopping both at once would overlap."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

NOTE = "read t _ < /proc/uptime; echo {what} $t >> /data/stop"
COMMAND = (f"trap '{NOTE.format(what='term')}; sleep 2; {NOTE.format(what='exit')}; exit 0' TERM; "
           "while true; do sleep 1 & wait $!; done")
APP = """
service db {{
    image busybox
    command "{command}"
    instances {count}
    stateful
    volume data "/data"
    resources {{ cpu 50m  memory 16Mi }}
}}
volume data {{ persistent true }}
"""


def stops(state: Path, instance: str) -> dict[str, float]:
    """{"term": uptime at SIGTERM, "exit": uptime when it exited}, from the instance's own volume."""
    log = state / "volumes" / "default" / "data" / instance / "stop"
    if not log.exists():
        return {}
    return {kind: float(at) for kind, at in (line.split() for line in log.read_text().splitlines())}


def test_scale_down_stops_the_highest_ordinal_first(root, shell, node_state: Path, network_names, port: int,
                                                     wait, tmp_path: Path) -> None:
    shell.up_local(port, node_state, network_names)
    try:
        app = tmp_path / "app.cca"
        app.write_text(APP.format(count=3, command=COMMAND))
        shell.cca("apply", str(app))

        def running() -> list[str]:
            return sorted(i["name"] for i in shell.instances()
                          if i["service"] == "default/db" and i["state"] == "running")

        wait(lambda: running() == ["db-0", "db-1", "db-2"], "db-0, db-1 and db-2 to run (in order)", 120)
        app.write_text(APP.format(count=1, command=COMMAND))
        shell.cca("apply", str(app))
        wait(lambda: [i["name"] for i in shell.instances() if i["service"] == "default/db"] == ["db-0"],
             "db-1 and db-2 to be gone", 120)
        two, one = (wait(lambda n=name: "exit" in stops(node_state, n) and stops(node_state, n),
                         f"{name}'s stop log") for name in ("db-2", "db-1"))
        assert two["exit"] - two["term"] >= 1.5  # it did take its time
        assert one["term"] >= two["exit"], f"db-1 was asked to stop before db-2 had exited: {one} {two}"
        assert stops(node_state, "db-0") == {}  # within the count: untouched
    finally:
        shell.cca("down")
