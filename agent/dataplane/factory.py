"""`make_dataplane(kind, …)`: the data plane `cca agent --dataplane` names, for one node.

    nftables  the default: services, external ports and policy in nftables (agent/dataplane/nftables.py)
    ebpf      socket LB and policy in BPF maps, attached to the node's own container cgroup; the
              nftables plane stays beside it for external ports and node-originated VIP traffic
    auto      ebpf when this host can run it, else nftables: decided first by `resolve_kind` (what
              the node document shows at registration: bpftool, a cgroup v2 hierarchy, the BPF
              object builds, the node has a cgroup of its own), then again by `make_dataplane` when
              the plane is made: loading or attaching failing then falls back to nftables (logged;
              the agent re-registers its node document with the plane actually used)
    memory    keeps the state only (tests, simulated nodes)
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

from ccattler.agent.dataplane.base import DataPlane
from ccattler.engine.facts import CcaError

DATAPLANES = ("nftables", "ebpf", "auto", "memory")
DEFAULT = "nftables"
log = logging.getLogger(__name__)


class DataPlaneUnavailable(CcaError):
    """The data plane asked for cannot run here (the reason says why)."""


def ebpf_pin_name(cgroup: str) -> str:
    """The bpffs directory of a node's programs: named by its cgroup (unique per runc root), not by
    the node name, which clusters side by side on one machine share."""
    return cgroup.strip("/").replace("/", "-")


def check_kind(kind: str) -> str:
    if kind not in DATAPLANES:
        raise CcaError(f"unknown data plane {kind!r} (expected one of {', '.join(DATAPLANES)})")
    return kind


def resolve_kind(kind: str, cgroup: str | None) -> str:
    """`auto` → `ebpf` when this host can load the BPF object and the node has a cgroup of its own
    (the runc runtime's), else `nftables`; other kinds as they are. What the node document reports
    at registration; `make_dataplane("auto", …)` still falls back when attaching fails later."""
    check_kind(kind)
    if kind not in ("auto", "ebpf"):
        return kind
    from ccattler.bpf import loader

    if kind == "ebpf":
        why = loader.supported() if cgroup and cgroup.strip("/") else "no node cgroup (runc runtime only)"
        if why is not None:
            raise DataPlaneUnavailable(f"--dataplane ebpf cannot run here: {why}")
        return kind

    why = loader.supported() if cgroup and cgroup.strip("/") else "no node cgroup (runc runtime only)"
    if why is not None:
        log.info("data plane auto: nftables (%s)", why)
        return "nftables"
    return "ebpf"


def make_dataplane(kind: str, node: str, *, bridge: str, gateway: str | None = None,
                   node_addresses: tuple[str, ...] = (), state_dir: Path | None = None,
                   cgroup: str | None = None) -> DataPlane:
    """The data plane `kind` for `node` whose containers sit on `bridge` (gateway: its address) and,
    for ebpf, below `cgroup` (relative to the cgroup v2 root; never the root itself)."""
    check_kind(kind)
    if kind == "memory":
        from ccattler.agent.dataplane.memory import MemoryDataPlane

        return MemoryDataPlane()
    from ccattler.agent.dataplane.nftables import NftablesDataPlane

    def nftables() -> DataPlane:
        return NftablesDataPlane(bridge, gateway, node_addresses)

    if kind == "nftables":
        return nftables()
    try:
        return _ebpf(node, cgroup, state_dir, (gateway, *node_addresses) if gateway else node_addresses,
                     nftables())
    except DataPlaneUnavailable as exc:
        if kind == "ebpf":
            raise
        log.warning("data plane auto: falling back to nftables (%s)", exc)
        _detach_ebpf(cgroup)  # whatever a half-made eBPF plane attached must not act beside nftables
        return nftables()


def _detach_ebpf(cgroup: str | None) -> None:
    if not cgroup or not cgroup.strip("/"):
        return
    from ccattler.bpf import loader

    try:
        problems = loader.NodePrograms(ebpf_pin_name(cgroup), cgroup.strip("/")).teardown()
    except (loader.LoadError, OSError) as exc:
        problems = [str(exc)]
    for problem in problems:
        log.warning("data plane auto: could not remove the eBPF programs: %s", problem)


def _ebpf(node: str, cgroup: str | None, state_dir: Path | None, host: tuple[str, ...],
          fallback: DataPlane) -> DataPlane:
    from ccattler.bpf import loader
    from ccattler.bpf.build import BuildError

    if not cgroup or not cgroup.strip("/"):
        raise DataPlaneUnavailable("the eBPF data plane needs a node cgroup of its own (the runc runtime's); "
                                   "it never attaches at the cgroup root")
    if state_dir is None:
        raise DataPlaneUnavailable("the eBPF data plane needs a state dir (identity numbers)")
    why = loader.supported()
    if why is not None:
        raise DataPlaneUnavailable(f"eBPF is not available here: {why}")
    from ccattler.agent.dataplane.ebpf import EbpfDataPlane

    try:
        return EbpfDataPlane(ebpf_pin_name(cgroup), cgroup.strip("/"), state_dir, host_addresses=host,
                             fallback=fallback)
    except (loader.LoadError, BuildError, OSError, subprocess.SubprocessError) as exc:
        raise DataPlaneUnavailable(f"cannot load or attach the eBPF programs: {exc}") from exc
