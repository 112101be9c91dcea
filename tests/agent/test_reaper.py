"""The child subreaper's bookkeeping (agent/runtime/reaper.py): an init that is still alive when
its container is forgotten is reaped once it dies, never left a zombie (a zombie holds the
container's cgroup, so `runc delete` of that id fails for as long as the agent runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from ccattler.agent.runtime.reaper import process_reaper


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return None


def test_an_init_forgotten_alive_is_reaped_after_it_dies():
    reaper = process_reaper()
    child = subprocess.Popen(["sleep", "60"])
    child.returncode = 0  # Popen must not reap it behind the reaper's back
    reaper.track("c1", child.pid)
    reaper.forget("c1", timeout=0.05)  # it outlived the wait: e.g. SIGKILL not done yet
    assert reaper.reap_leftovers() == 1 and _state(child.pid) not in (None, "Z")
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while reaper.reap_leftovers() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reaper.reap_leftovers() == 0
    assert _state(child.pid) is None  # reaped: no zombie left


def test_a_dead_init_is_reaped_when_forgotten():
    reaper = process_reaper()
    child = subprocess.Popen(["true"])
    child.returncode = 0
    reaper.track("c2", child.pid)
    reaper.forget("c2")
    assert reaper.reap_leftovers() == 0 and _state(child.pid) is None
