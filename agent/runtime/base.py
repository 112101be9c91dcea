"""The runtime interface every container runtime implements (runc, process, sim), and its values.

A runtime knows containers by name (`tenant/instance`); it creates, starts, stops and removes them,
lists what exists (so the reconciler can find orphans), and reads usage, logs and exec.
"""

from __future__ import annotations

import abc
import hashlib
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from ccattler.agent.runtime import logfile
from ccattler.engine.facts import CcaError

if TYPE_CHECKING:
    from ccattler.agent.runtime.volumes import NodeVolumes

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def container_id(name: str) -> str:
    """A runtime id for `tenant/instance`: readable, and unique through a short hash of the name."""
    return f"{_UNSAFE.sub('_', name.replace('/', '.'))}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


class ContainerError(CcaError):
    """A runtime operation failed (the message says which container and why)."""


class ContainerNotFound(ContainerError):
    """The runtime has no container of that name."""


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A file placed in the container at `path` (absolute) before it starts."""

    path: str
    content: str


@dataclass(frozen=True, slots=True)
class SecretFile:
    """A secret's plaintext, mounted read-only at `path` (its value never shows in a repr)."""

    path: str
    value: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class IdentityFiles:
    """An instance's workload identity (X.509-SVID) as PEMs: certificate, its private key (made on
    this node; never in a repr) and the trust bundle (agent/identity.py)."""

    cert: bytes
    key: bytes = field(repr=False)
    bundle: bytes


@dataclass(frozen=True, slots=True)
class VolumeMount:
    """A node directory `<state>/volumes/<key>` (kept across containers) mounted read-write at `path`.
    `key` is `tenant/volume` (shared by the volume's instances on this node) or
    `tenant/volume/instance` (one per stateful ordinal: `db-0` always gets its own). `size` (bytes,
    from the volume's declaration; None: unbounded or not known yet) is enforced where the node can
    (runtime.volumes), else reported."""

    key: str
    path: str
    size: int | None = None

    def host_dir(self, state_dir: Path) -> Path:
        parts = self.key.split("/")
        if not self.path.startswith("/") or ".." in self.path.split("/") or any(p in ("", ".", "..")
                                                                               for p in parts):
            raise ContainerError(f"volume {self.key} at {self.path!r}: the path must be absolute, "
                                 "without '..'")
        return state_dir.joinpath("volumes", *parts)


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """Everything a runtime needs to create one container.

    `name` is `tenant/instance`; `command` runs through `sh -c` (None: the image's entrypoint);
    `netns` is the path of a network namespace prepared by the networking layer (runc only).
    """

    name: str
    image: str
    command: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    files: tuple[ConfigFile, ...] = ()
    cpu_millis: int = 0
    memory_bytes: int = 0
    netns: str | None = None
    ip: str | None = None
    spec_hash: str = ""
    secrets: tuple[SecretFile, ...] = field(default=(), repr=False)
    volumes: tuple[VolumeMount, ...] = ()
    #: Mounted read-only at /run/ccattler/identity (agent/runtime/identity_files.py); None: none.
    identity: IdentityFiles | None = field(default=None, repr=False)
    #: The container's /etc/resolv.conf (the node-local resolver, agent/dns/); None: the host's.
    resolv_conf: str | None = None

    @property
    def hostname(self) -> str:
        """The instance's name (also for its init steps, named `tenant/instance/init-<i>`)."""
        parts = self.name.split("/")
        return parts[1] if len(parts) > 1 else parts[0]


#: created: prepared, never started; starting: started, not up yet (sim); exited: stopped or crashed.
State = Literal["created", "starting", "running", "exited"]


@dataclass(frozen=True, slots=True)
class ContainerStatus:
    """What a runtime sees of one container. `exit_code` is None when the runtime cannot know it."""

    name: str
    state: State
    spec_hash: str = ""
    pid: int | None = None
    exit_code: int | None = None
    reason: str | None = None
    started_at: float | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Resource usage of one container: cumulative cpu time, current memory and process count."""

    cpu_seconds: float
    memory_bytes: int
    pids: int = 0


@dataclass(frozen=True, slots=True)
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes


class Runtime(abc.ABC):
    """One container runtime. Every method is synchronous and safe to call from one thread."""

    #: "runc", "process" or "sim".
    kind: str
    #: True when containers get their own network namespace (the reconciler attaches a veth).
    isolated_network: bool = False
    #: The node's volume directories (None: this runtime keeps none, e.g. sim).
    volumes: NodeVolumes | None = None
    #: True when containers get the identity files of their spec (`ContainerSpec.identity`).
    identity_files: bool = False

    @abc.abstractmethod
    def create(self, spec: ContainerSpec) -> None:
        """Prepare the container (rootfs, config); raise if a container of that name exists."""

    @abc.abstractmethod
    def start(self, name: str) -> None:
        """Start a created container."""

    @abc.abstractmethod
    def stop(self, name: str, timeout: float = 5.0) -> None:
        """Ask the container to stop (SIGTERM), kill it after `timeout` seconds; no-op if exited."""

    @abc.abstractmethod
    def remove(self, name: str) -> None:
        """Delete the container and everything it owns (kills it first); no-op if absent."""

    @abc.abstractmethod
    def list(self) -> list[ContainerStatus]:
        """Every container this runtime holds, in any state."""

    @abc.abstractmethod
    def stats(self, name: str) -> Usage:
        """Current usage of a container."""

    @abc.abstractmethod
    def exec(self, name: str, argv: list[str], timeout: float = 30.0) -> ExecResult:
        """Run `argv` inside a running container and return its output."""

    def logs(self, name: str, tail_bytes: int | None = None) -> bytes:
        """The container's combined stdout and stderr (the last `tail_bytes` if given)."""
        return logfile.read(self.log_path(name), tail_bytes)

    def refresh_secrets(self, name: str, secrets: tuple[SecretFile, ...]) -> int:
        """Overwrite the container's secret files whose value changed (rotation); returns how many.
        `secrets` are the same names in the same order as at creation."""
        return 0

    def rotate_identity(self, name: str, identity: IdentityFiles) -> bool:
        """Switch the container's identity files to `identity` at once (rotation); False when the
        container has no identity directory (created without one)."""
        return False

    #: A runtime that keeps one folder per container, its `log` inside, names the parent here.
    container_dirs: Path | None = None

    def log_path(self, name: str) -> Path:
        """The file the container's stdout and stderr append to (rotated to `<file>.1`)."""
        if self.container_dirs is None:
            raise ContainerError(f"the {self.kind} runtime keeps no container logs")
        folder = self.container_dirs / container_id(name)
        if not folder.exists():
            raise ContainerNotFound(f"container {name} does not exist")
        return folder / "log"

    def init_log_path(self, name: str, create: bool = False) -> Path:
        """The file the output of instance `name`'s init steps is kept in (`cca logs --init`);
        it outlives the steps' containers. Without `create` it must exist."""
        if self.container_dirs is None:
            raise ContainerError(f"the {self.kind} runtime keeps no init logs")
        path = self.container_dirs.parent / "init-logs" / f"{container_id(name)}.log"
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.exists():
            raise ContainerNotFound(f"instance {name} has run no init steps on this node")
        return path

    def log_paths(self) -> list[Path] | None:
        """Every container's log file (for the time index), or None when the runtime keeps none."""
        if self.container_dirs is None:
            return None
        return [folder / "log" for folder in self.container_dirs.iterdir()]

    def exec_process(self, name: str, argv: list[str], tty: bool = False,
                     size: tuple[int, int] | None = None) -> subprocess.Popen[bytes]:
        """Start `argv` in the running container with stdin, stdout and stderr as pipes (interactive
        exec); with `tty` the command gets a terminal of `size` (rows, columns) whose master side is
        its stdin and stdout (`terminal.set_window_size` on it resizes)."""
        raise ContainerError(f"the {self.kind} runtime cannot exec into containers")

    def stop_many(self, names: list[str], timeout: float = 5.0) -> dict[str, str]:
        """Stop several containers; returns name → error for those that would not stop.
        Runtimes override this to share one grace period among all of them."""
        errors = {}
        for name in names:
            try:
                self.stop(name, timeout)
            except CcaError as exc:
                errors[name] = str(exc)
        return errors

    def status(self, name: str) -> ContainerStatus | None:
        """The status of one container, or None when absent."""
        return next((s for s in self.list() if s.name == name), None)

    def prune(self) -> list[str]:
        """Remove leftovers that belong to no container (e.g. after a crash); returns what went."""
        return []
