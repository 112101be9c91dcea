"""Named network namespaces (`/run/netns/<name>`, as `ip netns` keeps them), made and entered from a
short-lived thread with unshare/setns — ~1 ms, where forking a helper process costs tens of ms.

A namespace is a property of a thread on Linux, so `run_in(name, fn)` runs `fn` on a fresh thread
that joined the namespace; netlink sockets `fn` opens there talk to that namespace.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

NETNS_DIR = Path("/run/netns")
_CLONE_NEWNET = 0x40000000
_MS_BIND = 4096
_MS_REC = 16384
_MS_SHARED = 1 << 20
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)
T = TypeVar("T")


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _on_thread(fn: Callable[[], T]) -> T:
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    thread = threading.Thread(target=run, name="cca-netns")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("result")  # type: ignore[return-value]


def _shared_dir() -> None:
    """Make /run/netns a shared mount of its own, as iproute2 does: otherwise the first later
    `ip netns add` bind-mounts the directory over itself and hides the pins made before it."""
    NETNS_DIR.mkdir(parents=True, exist_ok=True)
    if _is_mount_point(NETNS_DIR):
        return
    d = str(NETNS_DIR).encode()
    _check(_libc.mount(d, d, None, _MS_BIND | _MS_REC, None), f"bind mount {NETNS_DIR}")
    _check(_libc.mount(b"none", d, None, _MS_SHARED | _MS_REC, None), f"make {NETNS_DIR} shared")


def _is_mount_point(path: Path) -> bool:
    """From mountinfo: os.path.ismount misses a bind mount of the same filesystem, and binding
    /run/netns over itself again on every create doubles its mounts each time (propagation)."""
    target = str(path)
    with open("/proc/self/mountinfo") as mounts:
        return any(line.split()[4] == target for line in mounts)


def create(name: str) -> Path:
    """Create the namespace `name` (pinned by a bind mount at /run/netns/<name>)."""
    _shared_dir()
    path = NETNS_DIR / name
    path.touch(exist_ok=False)

    def pin() -> None:
        _check(_libc.unshare(_CLONE_NEWNET), "unshare")
        source = b"/proc/thread-self/ns/net"
        _check(_libc.mount(source, str(path).encode(), None, _MS_BIND, None), "bind mount")

    try:
        _on_thread(pin)
    except OSError:
        path.unlink(missing_ok=True)
        raise
    return path


def remove(name: str) -> None:
    """Unpin and delete namespace `name` (it lives on while processes still use it).

    Lazy unmounts, repeated while the pin is still a mount point: another `ip netns add` meanwhile
    can stack a propagated copy over it, and unlinking a mount point fails with "Device or
    resource busy"."""
    path = NETNS_DIR / name
    for _ in range(64):  # each pass removes one stacked mount; 64 is far more than ever seen
        if not _is_mount_point(path):
            break
        _check(_libc.umount2(str(path).encode(), _MNT_DETACH), f"unmount {path}")
    path.unlink(missing_ok=True)


def run_in(name: str, fn: Callable[[], T]) -> T:
    """Run `fn` on a thread inside namespace `name` and return its result."""

    def enter() -> T:
        fd = os.open(NETNS_DIR / name, os.O_RDONLY)
        try:
            _check(_libc.setns(fd, _CLONE_NEWNET), f"setns {name}")
        finally:
            os.close(fd)
        return fn()

    return _on_thread(enter)
