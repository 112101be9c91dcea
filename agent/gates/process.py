"""The node's HAProxy: one master-worker process, its config, pid file and sockets in the node's
state dir (`<state>/gates/`). Started detached (it outlives an agent restart, like containers do),
reloaded by SIGUSR2 to the master (the new worker takes the listening sockets over, the old one
finishes its connections), stopped by SIGTERM. A config is checked (`haproxy -c`) before it is used."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from ccattler.engine.facts import CcaError

#: A unix socket path must fit sun_path (108 bytes with its NUL).
MAX_SOCKET_PATH = 107


class HaproxyError(CcaError):
    """HAProxy is missing, rejected a config, or did not start."""


class HaproxyProcess:
    def __init__(self, directory: Path, binary: str | None = None) -> None:
        self.dir = directory
        self.config = directory / "haproxy.cfg"
        self.pidfile = directory / "haproxy.pid"
        self.socket = directory / "haproxy.sock"
        self._binary = binary

    @property
    def binary(self) -> str:
        found = self._binary or shutil.which("haproxy") or (
            "/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
        if not found:
            raise HaproxyError("gates need HAProxy: apt-get install haproxy (deploy/install.sh does)")
        return found

    def check_paths(self) -> None:
        if len(str(self.socket).encode()) > MAX_SOCKET_PATH:
            raise HaproxyError(f"the gate socket path {self.socket} is longer than {MAX_SOCKET_PATH} bytes: "
                               "use a shorter --state-dir")

    def master_pid(self) -> int | None:
        """The running master's pid (from the pid file, checked against /proc), else None."""
        try:
            pid = int(self.pidfile.read_text().split()[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            return None
        if not cmdline or not cmdline[0].endswith(b"haproxy") or str(self.config).encode() not in cmdline:
            return None  # a stale pid file whose number another process has now
        return pid

    def write(self, text: str) -> None:
        """Check `text` with `haproxy -c`, then put it in place atomically."""
        self.dir.mkdir(parents=True, exist_ok=True)
        candidate = self.dir / "haproxy.cfg.new"
        candidate.write_text(text)
        done = subprocess.run([self.binary, "-c", "-q", "-f", str(candidate)], capture_output=True, text=True)
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip()[-600:]
            raise HaproxyError(f"HAProxy rejected the gate config: {why}")
        os.replace(candidate, self.config)

    def start_or_reload(self, timeout: float = 10.0) -> None:
        """Start HAProxy, or reload the running one and wait for its new worker."""
        pid = self.master_pid()
        if pid is None:
            self._start()
            return
        before = _children(pid)
        os.kill(pid, signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while not (new := _children(pid) - before):
            if time.monotonic() > deadline:
                raise HaproxyError(f"HAProxy (pid {pid}) started no new worker {timeout:.0f}s after a reload")
            time.sleep(0.02)
        # A forked worker is not yet serving: until it answers on the stats socket the old worker
        # still holds the listeners (with the old routing). Wait until the socket is the new one's.
        while self._socket_pid() not in new:
            if time.monotonic() > deadline:
                raise HaproxyError(f"HAProxy's new worker (pid {', '.join(map(str, new))}) did not take over "
                                   f"{timeout:.0f}s after a reload")
            time.sleep(0.02)

    def _socket_pid(self) -> int | None:
        """The pid of the worker answering on the stats socket (`show info`), or None."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(1.0)
                sock.connect(str(self.socket))
                sock.sendall(b"show info\n")
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
        except OSError:
            return None
        for line in answer.decode(errors="replace").splitlines():
            if line.startswith("Pid:"):
                return int(line.split(":", 1)[1]) if line.split(":", 1)[1].strip().isdigit() else None
        return None

    def _start(self) -> None:
        self.pidfile.unlink(missing_ok=True)
        log = self.dir / "haproxy.log"  # a file, not a pipe: the daemon may keep its stderr open
        with open(log, "wb") as out:
            done = subprocess.run([self.binary, "-W", "-D", "-p", str(self.pidfile), "-f", str(self.config)],
                                  stdout=out, stderr=out, stdin=subprocess.DEVNULL, timeout=30)
        # The daemonized master writes its pid file after our child has exited: wait for it (on a
        # loaded machine that took longer than the child's exit, and a started HAProxy was called
        # a failure).
        deadline = time.monotonic() + 5.0
        while done.returncode == 0 and self.master_pid() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if done.returncode != 0 or self.master_pid() is None:
            raise HaproxyError(f"HAProxy did not start: {log.read_text(errors='replace').strip()[-600:]}")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the master and its workers; remove the files."""
        pid = self.master_pid()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)


def _children(pid: int) -> set[int]:
    try:
        return {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:
        return set()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
