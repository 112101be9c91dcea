"""Exit codes of detached runc containers. The agent process becomes a child subreaper, so the init
of each container it starts (orphaned when `runc run -d` returns) is re-parented to the agent,
stays a zombie until waited for, and gives up its exit status. Only pids this process started are
ever waited for, so no other child's status is stolen and a pid cannot be reused under us.

Being a subreaper is a property of the process, so there is one `Reaper` per process
(`process_reaper()`), shared by every runtime object in it. After an agent restart the containers
belong to init: their exit codes are unknown (None).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)
_instance: Reaper | None = None
_instance_lock = threading.Lock()


def process_reaper() -> Reaper:
    """This process's reaper (made, and the process turned subreaper, on first use)."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = Reaper()
        return _instance


def describe(code: int | None) -> str:
    """`exited with code 3`, `killed by SIGKILL`, or `exited` when the code is unknown."""
    if code is None:
        return "exited"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Reaper:
    """Tracks container init pids by container id and collects their exit codes."""

    def __init__(self) -> None:
        if _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        self._pids: dict[str, int] = {}
        self._codes: dict[str, int] = {}
        self._leftovers: set[int] = set()  # forgotten inits not dead yet: reaped later, never leaked
        self._lock = threading.Lock()

    def track(self, cid: str, pid: int) -> None:
        with self._lock:
            self._pids[cid] = pid
            self._codes.pop(cid, None)

    def exit_code(self, cid: str) -> int | None:
        """The container's exit code once its init has died (negative: killed by that signal)."""
        with self._lock:
            if cid in self._codes:
                return self._codes[cid]
            pid = self._pids.get(cid)
            if pid is None:
                return None
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours after all: nothing to learn
                del self._pids[cid]
                return None
            if done == 0:
                return None
            del self._pids[cid]
            self._codes[cid] = os.waitstatus_to_exitcode(status)
            return self._codes[cid]

    def forget(self, cid: str, timeout: float = 2.0) -> None:
        """Reap the (killed) init of a deleted container so no zombie is left, and drop it."""
        deadline = time.monotonic() + timeout
        while self.exit_code(cid) is None and cid in self._pids and time.monotonic() < deadline:
            time.sleep(0.01)
        with self._lock:
            pid = self._pids.pop(cid, None)
            self._codes.pop(cid, None)
            if pid is not None:  # still alive (it outlived SIGKILL so far): a zombie to reap later
                self._leftovers.add(pid)
        self.reap_leftovers()

    def reap_leftovers(self) -> int:
        """Wait for forgotten inits that have died since; how many are still alive. A zombie of
        ours is never left: it would hold its container's cgroup, so `runc delete` of that id
        would fail for as long as the agent runs."""
        with self._lock:
            for pid in list(self._leftovers):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    self._leftovers.discard(pid)
            return len(self._leftovers)

    def kill_orphan(self, pid_file: Path, timeout: float = 2.0) -> None:
        """Kill and reap the process of a `runc exec` that was itself killed (a probe past its
        timeout). That process was re-parented to this subreaper; left alive or unreaped it would
        keep its container's pid namespace from ever ending, so the container could never be
        deleted or started again under its id ("container with given ID already exists")."""
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):  # runc died before it started the process: nothing left
            return
        self.kill_orphans([pid], timeout)

    def kill_orphans(self, pids: list[int], timeout: float = 2.0) -> None:
        """Kill and reap these processes of a killed `runc exec` (see `kill_orphan`): only those
        now re-parented to this process, never a stranger."""
        ours = [pid for pid in pids if _parent_of(pid) == os.getpid()]  # others: gone, or not ours
        for pid in ours:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        with self._lock:
            self._leftovers.update(ours)
        deadline = time.monotonic() + timeout
        while (self.reap_leftovers() and any(pid in self._leftovers for pid in ours)
               and time.monotonic() < deadline):
            time.sleep(0.01)


def stop_with_children(parent: int, timeout: float = 1.0) -> list[int]:
    """Stop `parent` and each of its children (SIGSTOP, waited for until every thread of each has
    stopped), reading its children again until no new one shows, so none of them starts another
    meanwhile (a `runc exec` just started has its init stages, which clone theirs as runc's
    children). Their pids: once `parent` is killed they are this subreaper's, for `kill_orphans`."""
    deadline = time.monotonic() + timeout
    found: list[int] = []
    new = [parent]
    while new and len(found) < 64:
        for pid in new:
            _stop(pid, deadline)
        new = [pid for pid in children_of(parent) if pid not in found]
        found += new
    return found


def children_of(parent: int) -> list[int]:
    """The pids whose parent is `parent`, read from /proc (a process's `children` file lists only
    those its one thread forked: runc is a multi-threaded Go program)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _parent_of(int(entry.name)) == parent:
            found.append(int(entry.name))
    return found


def _stop(pid: int, deadline: float) -> None:
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return
    while not _stopped(pid) and time.monotonic() < deadline:
        time.sleep(0.001)


def _stopped(pid: int) -> bool:
    """Every thread of `pid` has stopped (or is dead)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for thread in threads:
        try:
            state = Path(f"/proc/{pid}/task/{thread}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("T", "t", "Z", "X"):
            return False
    return True


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # after "(comm)": state, then ppid
