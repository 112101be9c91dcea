"""The process runtime: each container is a plain process group on the host, for development
without root. No isolation: the image is not unpacked, the command runs through the host's
`/bin/sh -c` in `<state>/processes/<id>/root` (where config files are written, mode 0444, under
their path, and volume directories linked; volume sizes are measured and reported, not enforced).
The identity files are in `<root>/run/ccattler/identity` (`CCA_IDENTITY_DIR` says where).

Knobs: `state_dir`, `max_log_bytes` (log rotation). Processes survive an agent restart; they are
found again by pid and start time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from ccattler.agent.runtime import logfile
from ccattler.agent.runtime.base import (
    ContainerError,
    ContainerNotFound,
    ContainerSpec,
    ContainerStatus,
    ExecResult,
    IdentityFiles,
    Runtime,
    SecretFile,
    Usage,
    container_id,
)
from ccattler.agent.runtime.identity_files import IDENTITY_DIR, write_identity
from ccattler.agent.runtime.secrets import overwrite
from ccattler.agent.runtime.volumes import NodeVolumes

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _proc_stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields after the command name, from field 3 on


def _alive(pid: int, start_ticks: str) -> bool:
    fields = _proc_stat(pid)
    return fields is not None and fields[19] == start_ticks and fields[0] != "Z"


class ProcessRuntime(Runtime):
    """Containers as host process groups; exit codes are known for processes this object started."""

    kind = "process"
    isolated_network = False
    identity_files = True

    def __init__(self, state_dir: Path | str, max_log_bytes: int = logfile.DEFAULT_MAX_BYTES):
        self.max_log_bytes = max_log_bytes
        self.dirs = self.container_dirs = Path(state_dir) / "processes"
        self.dirs.mkdir(parents=True, exist_ok=True)
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self.volumes: NodeVolumes = NodeVolumes(state_dir, enforce=False)  # no mounts: sizes are reported

    def create(self, spec: ContainerSpec) -> None:
        if spec.command is None:
            raise ContainerError(f"{spec.name}: the process runtime needs a command (it does not run images)")
        folder = self.dirs / container_id(spec.name)
        if folder.exists():
            raise ContainerError(f"container {spec.name} already exists")
        root = folder / "root"
        root.mkdir(parents=True)
        for volume in spec.volumes:  # no mounts here: a link to the node's volume directory
            host = self.volumes.prepare(volume)
            link = root.joinpath(*[p for p in volume.path.split("/") if p not in ("", ".")])
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(host)
        for file in spec.files:
            parts = [p for p in file.path.split("/") if p not in ("", ".")]
            if not parts or ".." in parts:
                raise ContainerError(f"{spec.name}: config file path {file.path!r} is not valid")
            root.joinpath(*parts).parent.mkdir(parents=True, exist_ok=True)
            root.joinpath(*parts).write_text(file.content)
            root.joinpath(*parts).chmod(0o444)  # read-only as far as a plain process can be told
        for secret in spec.secrets:  # no isolation here: plain files, readable by their owner only
            parts = [p for p in secret.path.split("/") if p not in ("", ".")]
            if not parts or ".." in parts:
                raise ContainerError(f"{spec.name}: secret mount {secret.path!r} is not valid")
            root.joinpath(*parts).parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(root.joinpath(*parts), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
            with os.fdopen(fd, "wb") as out:
                out.write(secret.value)
        env = {"HOSTNAME": spec.hostname, **spec.env}
        if spec.identity is not None:  # no mounts here: the files under the process's root
            identity = root.joinpath(*IDENTITY_DIR.strip("/").split("/"))
            identity.mkdir(parents=True, mode=0o755)
            write_identity(identity, spec.identity)
            env["CCA_IDENTITY_DIR"] = str(identity)
        meta = {"name": spec.name, "spec_hash": spec.spec_hash, "command": spec.command, "env": env}
        (folder / "meta.json").write_text(json.dumps(meta))

    def start(self, name: str) -> None:
        folder = self.dirs / container_id(name)
        meta = self._meta(folder)
        if meta is None:
            raise ContainerNotFound(f"container {name} does not exist")
        env = self._env(folder, meta)
        with open(folder / "log", "ab") as log:
            child = subprocess.Popen(["/bin/sh", "-c", meta["command"]], cwd=folder / "root", env=env,
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        fields = _proc_stat(child.pid)
        meta.update(pid=child.pid, start_ticks=fields[19] if fields else "", started=time.time())
        (folder / "meta.json").write_text(json.dumps(meta))
        self._children[name] = child

    def stop(self, name: str, timeout: float = 5.0) -> None:
        meta = self._meta(self.dirs / container_id(name))
        if meta is None or not self._running(meta):
            return
        self._signal(meta["pid"], signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._running(meta):
                return
            time.sleep(0.05)
        self._signal(meta["pid"], signal.SIGKILL)
        for _ in range(100):
            if not self._running(meta):
                return
            time.sleep(0.02)

    def remove(self, name: str) -> None:
        folder = self.dirs / container_id(name)
        meta = self._meta(folder)
        if meta is not None and self._running(meta):
            self._signal(meta["pid"], signal.SIGKILL)
            self._reap(name, wait=True)
        self._children.pop(name, None)
        with logfile.LOCK:  # the log indexer must not re-create log.idx in a half-removed folder
            shutil.rmtree(folder, ignore_errors=True)

    def list(self) -> list[ContainerStatus]:
        statuses = []
        for folder in sorted(self.dirs.iterdir()):
            meta = self._meta(folder)
            if meta is None:
                continue
            name = meta["name"]
            if "pid" not in meta:
                statuses.append(ContainerStatus(name, "created", meta["spec_hash"]))
            elif self._running(meta):
                statuses.append(ContainerStatus(name, "running", meta["spec_hash"], pid=meta["pid"],
                                                started_at=meta["started"]))
            else:
                code = self._reap(name, wait=False)
                reason = "exited" if code is None else f"exited with code {code}"
                statuses.append(ContainerStatus(name, "exited", meta["spec_hash"], exit_code=code,
                                                reason=reason, started_at=meta["started"]))
        return statuses

    def stats(self, name: str) -> Usage:
        meta = self._meta(self.dirs / container_id(name))
        if meta is None or not self._running(meta):
            raise ContainerError(f"container {name} is not running")
        fields = _proc_stat(meta["pid"]) or []
        cpu = (int(fields[11]) + int(fields[12])) / _TICKS if fields else 0.0
        try:
            rss = int(Path(f"/proc/{meta['pid']}/statm").read_text().split()[1]) * _PAGE
        except (OSError, IndexError):
            rss = 0
        return Usage(cpu_seconds=cpu, memory_bytes=rss)

    def exec(self, name: str, argv: list[str], timeout: float = 30.0) -> ExecResult:
        folder = self.dirs / container_id(name)
        meta = self._meta(folder)
        if meta is None or not self._running(meta):
            raise ContainerError(f"container {name} is not running")
        try:
            result = subprocess.run(argv, cwd=folder / "root", env=self._env(folder, meta),
                                    stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ContainerError(f"exec in {name} did not finish within {timeout:g}s") from None
        except OSError as exc:
            raise ContainerError(f"exec in {name}: {exc}") from None
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def refresh_secrets(self, name: str, secrets: tuple[SecretFile, ...]) -> int:
        root = self.dirs / container_id(name) / "root"
        return sum(overwrite(root.joinpath(*[p for p in s.path.split("/") if p not in ("", ".")]), s.value)
                   for s in secrets)

    def rotate_identity(self, name: str, identity: IdentityFiles) -> bool:
        folder = self.dirs.joinpath(container_id(name), "root", *IDENTITY_DIR.strip("/").split("/"))
        if not folder.is_dir():
            return False
        write_identity(folder, identity)
        return True

    def exec_process(self, name: str, argv: list[str], tty: bool = False,
                     size: tuple[int, int] | None = None) -> subprocess.Popen[bytes]:
        folder = self.dirs / container_id(name)
        meta = self._meta(folder)
        if meta is None or not self._running(meta):
            raise ContainerError(f"container {name} is not running")
        if tty:
            raise ContainerError("a terminal (-t) needs the runc runtime")
        try:
            return subprocess.Popen(argv, cwd=folder / "root", env=self._env(folder, meta),
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise ContainerError(f"exec in {name}: {exc}") from None

    def prune(self) -> list[str]:
        """Rotate logs that grew past their limit (a process runtime leaves no other leftovers)."""
        for folder in self.dirs.iterdir():
            logfile.rotate(folder / "log", self.max_log_bytes)
        return []

    # -- internals -----------------------------------------------------------------------------
    @staticmethod
    def _env(folder: Path, meta: dict[str, Any]) -> dict[str, str]:
        """A clean environment (the agent's own variables may hold secrets): PATH, HOME, the spec's."""
        path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        return {"PATH": path, "HOME": str(folder / "root"), **meta["env"]}

    @staticmethod
    def _meta(folder: Path) -> dict[str, Any] | None:
        try:
            return json.loads((folder / "meta.json").read_text())
        except (OSError, ValueError):
            return None

    def _running(self, meta: dict[str, Any]) -> bool:
        child = self._children.get(meta["name"])
        if child is not None and child.pid == meta.get("pid"):
            return child.poll() is None
        return "pid" in meta and _alive(meta["pid"], meta["start_ticks"])

    def _reap(self, name: str, wait: bool) -> int | None:
        child = self._children.get(name)
        if child is None:
            return None
        return child.wait(timeout=5) if wait else child.poll()

    @staticmethod
    def _signal(pid: int, sig: int) -> None:
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
