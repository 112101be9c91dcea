"""The child subreaper's bookkeeping (agent/runtime/reaper.py): an init that is still alive when
its container is forgotten is reaped once it dies, never left a zombie (a zombie holds the
container's cgroup, so `runc delete` of that id fails for as long as the agent runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from ccattler.agent.runtime.reaper import children_of, process_reaper


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


def test_the_children_of_a_killed_parent_are_killed_and_reaped_strangers_left_alone():
    """What a killed interactive `runc exec` leaves: its child, re-parented to this subreaper."""
    reaper = process_reaper()
    parent = subprocess.Popen(["sh", "-c", "sleep 300 & wait"])
    stranger = subprocess.Popen(["sleep", "300"])  # ours, but no orphan of that parent
    try:
        deadline = time.monotonic() + 5
        while not (orphans := children_of(parent.pid)):
            assert time.monotonic() < deadline, "sh never started its sleep"
            time.sleep(0.01)
        parent.kill()
        parent.wait()
        assert all(_state(pid) not in (None, "Z") for pid in orphans)  # alive after its parent
        reaper.kill_orphans([*orphans, os.getppid()])  # our own parent: not ours to signal
        assert [pid for pid in orphans if _state(pid) is not None] == []  # killed, and no zombie
        assert stranger.poll() is None and _state(os.getppid()) is not None
    finally:
        stranger.kill()
        stranger.wait()


def test_a_removed_node_leaves_no_cgroup_directories(tmp_path) -> None:
    """runc removes each container's cgroup but not the parents it made (`ccattler/<token>` in every
    hierarchy): a node removed with its containers (`cca down`) removes them, and the shared
    `ccattler` parent where no other node uses it."""
    from ccattler.agent.runtime.runc import remove_node_cgroups

    for hierarchy in ("cpu", "memory", "unified"):
        (tmp_path / hierarchy / "ccattler" / "aaaaaa").mkdir(parents=True)
    (tmp_path / "memory" / "ccattler" / "bbbbbb").mkdir()  # another node's
    (tmp_path / "unified" / "ccattler" / "aaaaaa" / "still-running").mkdir()  # a container left
    left = remove_node_cgroups("aaaaaa", "ccattler", tmp_path)
    assert not (tmp_path / "cpu" / "ccattler").exists()
    assert sorted(p.name for p in (tmp_path / "memory" / "ccattler").iterdir()) == ["bbbbbb"]
    assert left == [str(tmp_path / "unified" / "ccattler" / "aaaaaa")]
