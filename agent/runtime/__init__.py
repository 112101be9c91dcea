"""Container runtimes behind one interface: `runc` (real containers), `process` (plain processes,
no root) and `sim` (simulated, for scale tests); `ccattler.agent.machine.make_runtime` picks one."""

from ccattler.agent.runtime.base import (
    ConfigFile,
    ContainerError,
    ContainerNotFound,
    ContainerSpec,
    ContainerStatus,
    ExecResult,
    Runtime,
    Usage,
    container_id,
)

__all__ = [
    "ConfigFile",
    "ContainerError",
    "ContainerNotFound",
    "ContainerSpec",
    "ContainerStatus",
    "ExecResult",
    "Runtime",
    "Usage",
    "container_id",
]
