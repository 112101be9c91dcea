"""`cca down` finishes every step it can (issue 12 class 7): a node clean-up that fails is
reported, and the server is stopped anyway."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ccattler.cli import localcluster as lc


def test_a_failing_node_cleanup_is_reported_and_the_server_still_stops(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "ccattler-server"])
    try:
        (home / "run" / "server.pid").write_text(f"{server.pid}\n")
        lc.Layout("ctx", "runc", str(tmp_path / "state"), "cd0", None, ("local",)).save(home)

        def busy(layout, say) -> None:
            raise OSError(16, "Device or resource busy")

        monkeypatch.setattr(lc, "remove_node_leftovers", busy)
        said: list[str] = []
        assert lc.down(home, said.append)
        deadline = time.monotonic() + 20  # poll, not wait(timeout): `down` may have reaped it already
        while server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.poll() is not None, "the server was stopped after the failed step"
        assert any("could not remove" in line and "busy" in line for line in said), said
        assert not (home / "run" / "up.json").exists()
    finally:
        server.kill()
        server.wait()
