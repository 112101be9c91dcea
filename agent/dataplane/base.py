"""The data plane contract every implementation (memory, nftables, ebpf) keeps.

The agent builds one `DataPlaneState` from its slice and calls `apply(state)` whenever it changes;
an implementation programs the difference from what it last programmed (or, after a restart, from
what it reads back from the kernel: `apply` must repair, never just append), in one atomic step
where the kernel allows. `apply` is idempotent: the same state twice changes nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

PROTOCOLS = ("tcp", "udp")


@dataclass(frozen=True, order=True)
class Backend:
    """One ready endpoint: an instance address and the port it listens on."""

    ip: str
    port: int
    node: str = ""       # the node it runs on ("" when unknown); local when == this node
    instance: str = ""   # for counters and explain


@dataclass(frozen=True, order=True)
class Frontend:
    """What a client connects to: a service VIP, or (ip "") every node address for an external port."""

    ip: str
    port: int
    protocol: str = "tcp"


@dataclass(frozen=True)
class PolicyIngress:
    """Allowed traffic into one identity's local instances (a default-deny destination): the
    identity's local addresses and the (source identity, port, protocol) tuples it accepts.
    Port 0 means any port; protocol "any" any protocol."""

    identity: str                                  # "tenant/service"
    local_ips: frozenset[str]
    allowed: frozenset[tuple[str, int, str]]       # (source identity, port, protocol)


@dataclass(frozen=True)
class DataPlaneState:
    """Everything one node's kernel should enforce."""

    services: dict[Frontend, tuple[Backend, ...]] = field(default_factory=dict)  # VIPs; () = refuse
    external: dict[Frontend, tuple[Backend, ...]] = field(default_factory=dict)  # node ports
    identities: dict[str, frozenset[str]] = field(default_factory=dict)  # identity → all its addresses
    policies: dict[str, PolicyIngress] = field(default_factory=dict)     # identity → ingress rules


class DataPlane(ABC):
    """One node's data plane. `name` is what `cca get nodes -o wide` shows."""

    name: str = "?"

    @abstractmethod
    def apply(self, state: DataPlaneState) -> None:
        """Make the kernel enforce `state` (diff against what is programmed; atomic per call)."""

    @abstractmethod
    def programmed(self) -> DataPlaneState:
        """What the kernel enforces now, read back (for `cca node-inspect --dataplane` and repair)."""

    def admit(self, identity: str, ip: str) -> None:  # noqa: B027 (open planes admit everything)
        """Fail closed: put `ip` under `identity`'s policy (when it has one) before its instance's
        process starts; the next `apply` carries it anyway, this only closes the gap before it."""

    def teardown(self) -> None:  # noqa: B027 (optional: memory has nothing to remove)
        """Remove everything this data plane created (tables, pinned maps, attachments)."""
