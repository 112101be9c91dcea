"""The runc runtime: one OCI bundle per container (an overlay over the image's unpacked rootfs),
run detached with stdio redirected to a log file, listed and killed through runc's own state.

Knobs: `state_dir` (bundles under `<state>/containers/<id>`), `runc_root` (runc's state, default
`/run/ccattler/runc`; everything in it belongs to this runtime, which is how orphans are found),
`pull_missing` and `max_log_bytes` (log rotation, on `prune`). Creating one makes this process a
child subreaper (see `reaper`) for exit codes.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import pty
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ccattler.agent.images.store import Image, ImageNotFound, ImageStore
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
from ccattler.agent.runtime.bundle_files import config_mounts, write_etc_files
from ccattler.agent.runtime.identity_files import mount_identity, rotate_identity, unmount_identity
from ccattler.agent.runtime.oci_spec import runtime_config
from ccattler.agent.runtime.reaper import Reaper, describe, process_reaper, stop_with_children
from ccattler.agent.runtime.secrets import mount_secrets, refresh_secrets, unmount_secrets
from ccattler.agent.runtime.terminal import set_window_size
from ccattler.agent.runtime.volumes import NodeVolumes
from ccattler.engine.facts import CcaError

_libc = ctypes.CDLL(None, use_errno=True)
_MNT_DETACH = 2


def _mount_overlay(lower: Path, upper: Path, work: Path, target: Path) -> None:
    opts = f"lowerdir={lower},upperdir={upper},workdir={work}".encode()
    if _libc.mount(b"overlay", str(target).encode(), b"overlay", 0, opts) != 0:
        err = ctypes.get_errno()
        raise ContainerError(f"cannot mount the container rootfs at {target}: {os.strerror(err)}")


def _umount(target: Path) -> None:
    if os.path.ismount(target):
        _libc.umount2(str(target).encode(), _MNT_DETACH)


def _started_at(bundle: Path) -> float | None:
    try:
        return float((bundle / "started").read_text())
    except (OSError, ValueError):  # not started yet, or removed meanwhile by another caller
        return None


class _Exec(subprocess.Popen):
    """An interactive `runc exec` (`cca exec`): killed (the client went away), it takes the process
    it runs in the container with it, as a timed-out probe's exec does. Killing runc alone left that
    process re-parented to the agent (the subreaper) and never reaped, alive with pipes and a
    zombie on a terminal (hung up), so the container could not be deleted.

    That process is runc's child: it is found in /proc, not by `--pid-file`. runc writes a pid file
    with O_SYNC after starting the command and before it first sizes the container's terminal, so
    on a disk-backed directory the command saw a 0×0 terminal for that much longer (measured: a
    first `stty size` saw 0×0 in 15-19 of 40 execs with the file in an ext4 /tmp, 1-4 of 40
    without it; the cause of the terminal tests' failures that reverted this fix as 88a9ab0)."""

    reaper: Reaper

    def kill(self) -> None:
        if self.poll() is not None:  # runc has exited, and waited for its process first
            return
        try:  # stopped, runc and its children start nothing more while they are read
            orphans = stop_with_children(self.pid)
        finally:
            super().kill()
        try:
            super().wait(timeout=2)
        except subprocess.TimeoutExpired:  # still runc's, so none of them are signalled
            pass
        self.reaper.kill_orphans(orphans)


def _on_terminal(args: list[str], size: tuple[int, int] | None,
                 popen: type[subprocess.Popen] = subprocess.Popen) -> subprocess.Popen[bytes]:
    """Run `args` on a new pty as its controlling terminal (`runc exec -t` relays its own terminal
    into the container's, `size` rows × columns to start with); the master side is the process's
    stdin and stdout."""
    master, slave = pty.openpty()
    # util-linux `setsid --ctty` makes the pty the controlling terminal, then execs runc. A
    # preexec_fn would force a real fork() in this multi-threaded gRPC process, whose fork
    # handlers abort the child ("Check failed: next_worker->state == KICKED").
    try:
        if size is not None:  # before runc starts: it sizes the container's terminal from ours
            set_window_size(master, *size)
        process = popen(["setsid", "--ctty", *args], stdin=slave, stdout=slave, stderr=slave)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    process.stdin = os.fdopen(os.dup(master), "wb", buffering=0)
    process.stdout = os.fdopen(master, "rb", buffering=0)
    process.stderr = open(os.devnull, "rb")  # noqa: SIM115 (closed by the reader at its end)
    return process


def cgroup_token(runc_root: Path | str) -> str:
    """A short name for one runc root: its containers' node cgroup is `ccattler/<token>`."""
    return hashlib.sha256(str(Path(runc_root).resolve()).encode()).hexdigest()[:6]


CGROUP_ROOT = Path("/sys/fs/cgroup")


def remove_node_cgroups(token: str, parent: str = "ccattler", root: Path = CGROUP_ROOT) -> list[str]:
    """Remove the node cgroup `parent/token` in every hierarchy (runc removes a container's own
    cgroup, never the parents it created), and the shared parent when no other node uses it; what
    could not be removed (still in use) is returned."""
    left = []
    for base in [root, *(p for p in root.iterdir() if p.is_dir())] if root.is_dir() else []:
        for path in (base / parent / token, base / parent):
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError:  # busy or not empty: another node's, or a process still in it
                if path.name == token:
                    left.append(str(path))
    return left


class RuncRuntime(Runtime):
    """Containers run by `runc` with the images of `images`."""

    kind = "runc"
    isolated_network = True
    identity_files = True

    def __init__(self, state_dir: Path | str, images: ImageStore,
                 runc_root: Path | str = "/run/ccattler/runc", runc: str = "runc",
                 cgroup_parent: str = "ccattler", pull_missing: bool = True,
                 max_log_bytes: int = logfile.DEFAULT_MAX_BYTES):
        if os.geteuid() != 0:
            raise ContainerError("the runc runtime needs root (use --runtime process for development)")
        if shutil.which(runc) is None:
            raise ContainerError(f"{runc} not found: install Debian's runc")
        self.bundles = self.container_dirs = Path(state_dir) / "containers"
        self.bundles.mkdir(parents=True, exist_ok=True)
        self.images = images
        self.root = Path(runc_root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.runc = runc
        self.cgroup_parent = cgroup_parent
        self._root_token = cgroup_token(self.root)
        self.pull_missing = pull_missing
        self.max_log_bytes = max_log_bytes
        self.reaper = process_reaper()  # this process becomes a child subreaper: exit codes
        self._pulls: dict[str, threading.Lock] = {}
        self._pulls_lock = threading.Lock()
        self.volumes: NodeVolumes = NodeVolumes(state_dir)  # sizes enforced when loop mounts work

    # -- lifecycle -----------------------------------------------------------------------------
    def create(self, spec: ContainerSpec) -> None:
        cid = container_id(spec.name)
        bundle = self.bundles / cid
        if bundle.exists():
            raise ContainerError(f"container {spec.name} already exists")
        image = self._image(spec.image)
        lower = self.images.rootfs(image.name)
        try:
            for part in ("upper", "work", "rootfs"):
                (bundle / part).mkdir(parents=True)
            write_etc_files(bundle / "upper", spec)
            mounts = (mount_secrets(bundle, spec.secrets) + mount_identity(bundle, spec.identity)
                      + self._volumes(spec) + config_mounts(bundle, spec))
            config = runtime_config(spec, image, "/" + self.cgroup(cid), mounts)
            (bundle / "config.json").write_text(json.dumps(config))
            meta = {"name": spec.name, "spec_hash": spec.spec_hash, "image": image.name,
                    "created": time.time()}
            (bundle / "meta.json").write_text(json.dumps(meta))
            _mount_overlay(lower, bundle / "upper", bundle / "work", bundle / "rootfs")
        except (OSError, ContainerError):
            self._discard(cid)
            raise

    def start(self, name: str) -> None:
        cid = container_id(name)
        bundle = self.bundles / cid
        if not (bundle / "config.json").exists():
            raise ContainerNotFound(f"container {name} does not exist")
        with open(bundle / "log", "ab") as log:
            # runc run -d hands our stdio to the container: files, never pipes, or the caller hangs.
            result = subprocess.run(
                [self.runc, "--root", str(self.root), "run", "-d", "--pid-file", str(bundle / "pid"),
                 "--bundle", str(bundle), cid],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=60)
        if result.returncode != 0:
            tail = (bundle / "log").read_bytes()[-400:].decode(errors="replace").strip()
            raise ContainerError(f"runc could not start {name}: {tail}")
        self.reaper.track(cid, int((bundle / "pid").read_text()))
        started = bundle / "started.tmp"
        started.write_text(str(time.time()))
        started.rename(bundle / "started")  # atomic: list() may read it from another thread

    def stop(self, name: str, timeout: float = 5.0) -> None:
        if error := self.stop_many([name], timeout).get(name):
            raise ContainerError(error)

    def stop_many(self, names: list[str], timeout: float = 5.0) -> dict[str, str]:
        """SIGTERM all, one shared grace period, then SIGKILL (all processes) what still runs."""
        wanted = {container_id(n): n for n in names}
        running = self._running(wanted)
        self._kill_all(running, ["TERM"])
        running = self._wait_stopped(running, timeout)
        self._kill_all(running, ["--all", "KILL"])
        running = self._wait_stopped(running, 2.0)
        return {wanted[cid]: f"container {wanted[cid]} did not stop after SIGKILL" for cid in running}

    def _running(self, cids: Mapping[str, str] | set[str]) -> set[str]:
        return {e["id"] for e in self._runc_list() if e["id"] in cids and e["status"] == "running"}

    def _kill_all(self, cids: set[str], signal_args: list[str]) -> None:
        """`runc kill` every container at once (one process each, waited together)."""
        kills = [subprocess.Popen([self.runc, "--root", str(self.root), "kill", *signal_args[:-1], cid,
                                   signal_args[-1]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for cid in cids]
        for kill in kills:
            kill.wait(timeout=30)

    def _wait_stopped(self, cids: set[str], timeout: float) -> set[str]:
        deadline = time.monotonic() + timeout
        while cids and time.monotonic() < deadline:
            time.sleep(0.05)
            cids = self._running(cids)
        return cids

    def remove(self, name: str) -> None:
        self._discard(container_id(name))

    def _discard(self, cid: str) -> None:
        if self._state(cid) is not None:
            self._runc("delete", "--force", cid, check=False)
        self.reaper.forget(cid)
        bundle = self.bundles / cid
        _umount(bundle / "rootfs")
        unmount_secrets(bundle)
        unmount_identity(bundle)
        with logfile.LOCK:  # the log indexer must not re-create log.idx in a half-removed bundle
            shutil.rmtree(bundle, ignore_errors=True)

    # -- observation ---------------------------------------------------------------------------
    def list(self) -> list[ContainerStatus]:
        known = {entry["id"]: entry for entry in self._runc_list()}
        statuses = []
        for bundle in sorted(self.bundles.iterdir()):
            meta = self._meta(bundle)
            if meta is None:
                continue
            entry = known.get(bundle.name)
            if entry is None:
                statuses.append(ContainerStatus(meta["name"], "created", meta.get("spec_hash", "")))
                continue
            running = entry["status"] in ("running", "paused", "created")
            code = None if running else self.reaper.exit_code(bundle.name)
            statuses.append(ContainerStatus(
                name=meta["name"], state="running" if running else "exited",
                spec_hash=meta.get("spec_hash", ""), pid=entry.get("pid") or None, exit_code=code,
                reason=None if running else self._exit_reason(bundle.name, code),
                started_at=_started_at(bundle)))
        return statuses

    def prune(self) -> list[str]:
        """Delete runc containers without a bundle and bundles without metadata (crash leftovers);
        rotate logs that grew past their limit."""
        pruned = []
        self.reaper.reap_leftovers()  # a container's unreaped init would make its delete fail
        bundles = {b.name for b in self.bundles.iterdir() if self._meta(b) is not None}
        for entry in self._runc_list():
            if entry["id"] not in bundles:
                self._runc("delete", "--force", entry["id"], check=False)
                pruned.append(entry["id"])
        for bundle in self.bundles.iterdir():
            if bundle.name not in bundles:
                self._discard(bundle.name)
                pruned.append(bundle.name)
            else:
                logfile.rotate(bundle / "log", self.max_log_bytes)
        return pruned

    def stats(self, name: str) -> Usage:
        out = self._runc("events", "--stats", container_id(name))
        data = json.loads(out).get("data", {})
        cpu = data.get("cpu", {}).get("usage", {}).get("total", 0)
        memory = data.get("memory", {}).get("usage", {}).get("usage", 0)
        pids = data.get("pids", {}).get("current", 0)
        return Usage(cpu_seconds=cpu / 1e9, memory_bytes=int(memory), pids=int(pids))

    def exec(self, name: str, argv: list[str], timeout: float = 30.0) -> ExecResult:
        cid = container_id(name)
        if self._state(cid) != "running":
            raise ContainerError(f"container {name} is not running")
        with tempfile.TemporaryDirectory(prefix="cca-exec-") as tmp:
            pid_file = Path(tmp) / "pid"
            args = [self.runc, "--root", str(self.root), "exec", "--pid-file", str(pid_file), cid, *argv]
            try:
                result = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                self.reaper.kill_orphan(pid_file)
                raise ContainerError(f"exec in {name} did not finish within {timeout:g}s") from None
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def refresh_secrets(self, name: str, secrets: tuple[SecretFile, ...]) -> int:
        return refresh_secrets(self.bundles / container_id(name), secrets)

    def rotate_identity(self, name: str, identity: IdentityFiles) -> bool:
        return rotate_identity(self.bundles / container_id(name), identity)

    def exec_process(self, name: str, argv: list[str], tty: bool = False,
                     size: tuple[int, int] | None = None) -> subprocess.Popen[bytes]:
        cid = container_id(name)
        if self._state(cid) != "running":
            raise ContainerError(f"container {name} is not running")
        args = [self.runc, "--root", str(self.root), "exec", *(["-t"] if tty else []), cid, *argv]
        if not tty:
            pipe = subprocess.PIPE
            process = _Exec(args, stdin=pipe, stdout=pipe, stderr=pipe)
        else:
            process = _on_terminal(args, size, _Exec)
        process.reaper = self.reaper
        return process

    def _volumes(self, spec: ContainerSpec) -> list[dict[str, Any]]:
        """Bind mounts of the spec's volume directories (made, or mounted again, by `volumes`)."""
        mounts = []
        for volume in spec.volumes:
            host = self.volumes.prepare(volume)
            mounts.append({"destination": volume.path, "type": "bind", "source": str(host),
                           "options": ["rbind", "rw", "nosuid", "nodev"]})
        return mounts

    def cgroup(self, cid: str) -> str:
        """The container's cgroup path (relative): below this runtime's own node cgroup, so two
        runtimes on one host (tests, several agents) never share a cgroup for containers of the
        same name, and the eBPF data plane attaches once for every container of this node."""
        return f"{self.node_cgroup}/{cid}"

    @property
    def node_cgroup(self) -> str:
        """The cgroup (relative to a hierarchy's root) holding every container of this runtime."""
        return f"{self.cgroup_parent}/{self._root_token}"

    def remove_node_cgroup(self, root: Path = CGROUP_ROOT) -> list[str]:
        """Remove this runtime's node cgroup once its containers are gone: `remove_node_cgroups`."""
        return remove_node_cgroups(self._root_token, self.cgroup_parent, root)

    # -- internals -----------------------------------------------------------------------------
    def _image(self, name: str) -> Image:
        """The image from the local store, pulled first when missing (once, however many wait)."""
        try:
            return self.images.resolve(name)
        except ImageNotFound:
            if not self.pull_missing:
                raise
        with self._pulls_lock:
            lock = self._pulls.setdefault(name, threading.Lock())
        with lock:
            try:
                return self.images.resolve(name)
            except ImageNotFound:
                from ccattler.agent.images.registry import pull

                try:
                    return pull(self.images, name)
                except CcaError as exc:  # a registry or image error: say both what and why
                    raise ImageNotFound(f"image {name} is not in the local store and pulling it failed: "
                                        f"{exc}") from None

    def _runc(self, *args: str, check: bool = True) -> str:
        result = subprocess.run([self.runc, "--root", str(self.root), *args], stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=30)
        if check and result.returncode != 0:
            raise ContainerError(f"runc {args[0]} {args[-1]}: {result.stderr.strip()}")
        return result.stdout

    def _runc_list(self) -> list[dict[str, Any]]:
        return json.loads(self._runc("list", "--format", "json") or "null") or []

    def _state(self, cid: str) -> str | None:
        result = subprocess.run([self.runc, "--root", str(self.root), "state", cid], stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=30)
        return json.loads(result.stdout)["status"] if result.returncode == 0 else None

    @staticmethod
    def _meta(bundle: Path) -> dict[str, Any] | None:
        try:
            return json.loads((bundle / "meta.json").read_text())
        except (OSError, ValueError):
            return None

    def _exit_reason(self, cid: str, code: int | None) -> str:
        """Why a container stopped, as far as runc lets us know: OOM kills are visible in its cgroup."""
        v1 = Path("/sys/fs/cgroup/memory") / self.cgroup(cid) / "memory.oom_control"
        v2 = Path("/sys/fs/cgroup") / self.cgroup(cid) / "memory.events"
        for path in (v1, v2):
            try:
                for line in path.read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip() not in ("", "0"):
                        return "killed: out of memory"
            except OSError:
                continue
        return describe(code)
