"""Builds an OCI runtime `config.json` for one container from its spec and image.

The defaults follow Docker's (its capability set, /proc /dev /sys mounts, masked paths); cgroup
limits come from the spec: cpu millicores → CFS quota per 100 ms period, memory in bytes.
"""

from __future__ import annotations

import resource
from typing import Any

from ccattler.agent.images.store import Image
from ccattler.agent.runtime.base import ContainerError, ContainerSpec

CFS_PERIOD_US = 100_000
_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
         "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
         "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]
_MOUNTS = [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
     "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
    {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
     "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
    {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
     "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
    {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
     "options": ["nosuid", "noexec", "nodev"]},
    {"destination": "/sys", "type": "sysfs", "source": "sysfs",
     "options": ["nosuid", "noexec", "nodev", "ro"]},
    {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
     "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]},
]
_MASKED = ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
           "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"]
_READONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]


def process_args(spec: ContainerSpec, image: Image) -> list[str]:
    """`sh -c <command>` when the spec has a command, else the image's entrypoint + cmd."""
    if spec.command is not None:
        return ["/bin/sh", "-c", spec.command]
    args = image.entrypoint
    if not args:
        raise ContainerError(f"{spec.name}: no command given and image {image.name} has no entrypoint or cmd")
    return args


def resources(spec: ContainerSpec) -> dict[str, Any]:
    res: dict[str, Any] = {"devices": [{"allow": False, "access": "rwm"}]}
    if spec.cpu_millis > 0:
        res["cpu"] = {"quota": max(1000, spec.cpu_millis * CFS_PERIOD_US // 1000), "period": CFS_PERIOD_US}
    if spec.memory_bytes > 0:
        res["memory"] = {"limit": spec.memory_bytes, "swap": spec.memory_bytes}
    return res


def runtime_config(spec: ContainerSpec, image: Image, cgroup: str,
                   extra_mounts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The `config.json` document; the rootfs is `rootfs/` inside the bundle."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **image.env,
           "HOSTNAME": spec.hostname, **spec.env}
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # a container cannot exceed the agent's own
    namespaces: list[dict[str, str]] = [{"type": t} for t in ("pid", "ipc", "uts", "mount")]
    namespaces.append({"type": "network", "path": spec.netns} if spec.netns else {"type": "network"})
    return {
        "ociVersion": "1.0.2-dev",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": process_args(spec, image),
            "env": [f"{k}={v}" for k, v in env.items()],
            "cwd": image.workdir,
            "capabilities": {k: list(_CAPS) for k in ("bounding", "effective", "permitted")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": hard, "soft": hard}],
            "noNewPrivileges": True,
        },
        "root": {"path": "rootfs", "readonly": False},
        "hostname": spec.hostname,
        "mounts": [dict(m) for m in _MOUNTS] + list(extra_mounts or []),
        "annotations": {"org.ccattler.instance": spec.name, "org.ccattler.spec": spec.spec_hash},
        "linux": {
            "cgroupsPath": cgroup,
            "resources": resources(spec),
            "namespaces": namespaces,
            "maskedPaths": list(_MASKED),
            "readonlyPaths": list(_READONLY),
        },
    }
