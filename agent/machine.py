"""This machine as a node: which runtime it runs (`make_runtime`), its capacity and the document it
registers (`node_document`), and removing what a node left behind without its agent
(`cleanup_node`, `cca down`). `NodeCore` (agent/node.py) is what runs on it.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ccattler.agent.dataplane.factory import ebpf_pin_name
from ccattler.agent.images.store import ImageStore
from ccattler.agent.net.node import NodeNetwork
from ccattler.agent.net.overlay import Overlay, device_name
from ccattler.agent.runtime.base import Runtime
from ccattler.engine.facts import CcaError

RUNTIMES = ("runc", "process", "sim")


def default_runtime_kind() -> str:
    """runc when this process is root and runc is installed, else process."""
    return "runc" if os.geteuid() == 0 and shutil.which("runc") else "process"


def make_runtime(kind: str, state_dir: Path, images: ImageStore, runc_root: Path | None = None) -> Runtime:
    if kind == "runc":
        from ccattler.agent.runtime.runc import RuncRuntime

        return RuncRuntime(state_dir, images, runc_root=runc_root or Path("/run/ccattler/runc"))
    if kind == "process":
        from ccattler.agent.runtime.process import ProcessRuntime

        return ProcessRuntime(state_dir)
    if kind == "sim":
        from ccattler.agent.runtime.sim import SimRuntime

        return SimRuntime()
    raise CcaError(f"unknown runtime {kind!r} (expected one of {', '.join(RUNTIMES)})")


def machine_capacity() -> dict[str, int]:
    """This machine's cpu (millicores, from the cpus this process may use) and memory (bytes: the
    physical memory, or this process's cgroup limit when lower)."""
    memory = 0
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
                break
    limit = _cgroup_memory_limit()
    return {"cpu": len(os.sched_getaffinity(0)) * 1000, "memory": min(memory, limit) if limit else memory}


def _cgroup_memory_limit() -> int | None:
    """The memory limit of this process's cgroup (v1 or v2), or None when unlimited or unknown."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "memory":
            candidate = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.limit_in_bytes"
        elif controllers == "":
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max"
        else:
            continue
        try:
            text = candidate.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # v1 reports "unlimited" as a huge number
            return int(text)
    return None


def node_document(*, capacity: Mapping[str, int] | None = None,
                  labels: Mapping[str, str] | None = None, zone: str | None = None,
                  restrictions: tuple[str, ...] = (), address: str | None = None,
                  architecture: str | None = None, dataplane: str | None = None) -> dict[str, Any]:
    """The `observed/node/<node>` document (docs/facts.md) an agent registers with."""
    from ccattler.agent.images.platform import host_platform

    return {"capacity": dict(capacity or machine_capacity()), "labels": dict(labels or {}),
            "zone": zone, "architecture": architecture or host_platform()[1],
            "restrictions": list(restrictions),
            "address": address or _host_address(), "dataplane": dataplane}


def _host_address() -> str:
    """The source address of the default route (a UDP connect sends nothing), else the hostname's."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only used to pick a route
            return probe.getsockname()[0]
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def cleanup_node(state_dir: Path, kind: str = "runc", bridge: str = "cca0",
                 runc_root: Path | None = None) -> list[str]:
    """Remove every container, namespace, veth, the bridge and the NAT table a node left in
    `state_dir`, without the agent that made them (`cca down` after a crash), stop its gates'
    HAProxy, and unmount volume images. Images and volume data stay. Every step is tried even when
    an earlier one fails; returns what could not be removed (empty: everything went)."""
    problems: list[str] = []

    def attempt(what: str, step: Callable[[], object]) -> None:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 (clean-up reports every failure and goes on)
            problems.append(f"{what}: {exc}")

    runtime = make_runtime(kind, state_dir, ImageStore(state_dir), runc_root)
    names = [status.name for status in runtime.list()]
    attempt("stopping containers", lambda: runtime.stop_many(names, timeout=1.0))
    for name in names:
        attempt(f"container {name}", lambda name=name: runtime.remove(name))
    attempt("container state", runtime.prune)
    if runtime.volumes is not None:  # unmounted, kept: no declaration here says they may go
        attempt("volume images", runtime.volumes.unmount_all)
    if runtime.isolated_network:
        network = NodeNetwork.recorded(state_dir, bridge)
        if network is not None:
            attempt("node network", network.teardown)
            network.close()
        attempt("overlay device", Overlay(device_name(bridge), "0.0.0.0").remove)
        problems.extend(remove_dataplanes(bridge, getattr(runtime, "node_cgroup", None)))
    from ccattler.agent.gates.manager import cleanup_gates

    attempt("gates (HAProxy)", lambda: cleanup_gates(state_dir))
    remove_cgroups = getattr(runtime, "remove_node_cgroup", None)
    if remove_cgroups is not None:  # runc leaves the node's `ccattler/<token>` in every hierarchy
        problems.extend(f"node cgroup still in use: {path}" for path in remove_cgroups())
    return problems


def remove_dataplanes(bridge: str, cgroup: str | None) -> list[str]:
    """The nftables tables and (when pinned) the eBPF programs and maps a node's data plane made,
    without the agent that made them; the node cgroup goes too once its containers are gone.
    Returns what could not be removed."""
    from ccattler.agent.dataplane.nftables import NftablesDataPlane

    problems: list[str] = []
    try:
        NftablesDataPlane(bridge).teardown()
    except CcaError as exc:
        problems.append(f"nftables data plane: {exc}")
    if not cgroup:
        return problems
    from ccattler.bpf import loader

    try:
        programs = loader.NodePrograms(ebpf_pin_name(cgroup), cgroup)
    except loader.LoadError:
        return problems  # no cgroup v2 here: nothing was attached
    problems.extend(f"eBPF data plane: {problem}" for problem in programs.teardown())
    try:
        programs.cgroup.rmdir()
    except OSError:
        pass  # not there, or still holds a container
    return problems
