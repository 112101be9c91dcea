"""Loads the BPF object once per node, pins its programs and maps under bpffs, and attaches the
programs to the node's container cgroup (cgroup v2: the unified hierarchy, which runc also fills
on a hybrid v1/v2 host). Pins survive an agent restart: a restarted agent finds them, re-uses the
maps (connections and counters stay) and only re-attaches what is missing.

Layout: /sys/fs/bpf/ccattler/<node>/{progs,maps}/…  Never attached at a hierarchy's root: several
nodes on one machine share the cgroup tree, and each attaches to its own subtree only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ccattler.bpf.build import OBJECT, BuildError, build

BPFFS = Path("/sys/fs/bpf")
#: program pin name → bpftool attach type
PROGRAMS = {"cca_connect4": "connect4", "cca_sendmsg4": "sendmsg4", "cca_recvmsg4": "recvmsg4",
            "cca_getpeername4": "getpeername4", "cca_ingress": "ingress"}
_ATTACH_TYPES = {"cgroup_inet4_connect": "connect4", "cgroup_udp4_sendmsg": "sendmsg4",
                 "cgroup_udp4_recvmsg": "recvmsg4", "cgroup_inet4_getpeername": "getpeername4",
                 "cgroup_inet_ingress": "ingress"}
MAPS = ("cca_services", "cca_backends", "cca_revnat", "cca_clients", "cca_inbound", "cca_ipcache",
        "cca_policy", "cca_policed")


class LoadError(RuntimeError):
    """Loading, pinning or attaching failed (bpftool's message included)."""


def _bpftool(*args: str) -> str:
    if shutil.which("bpftool") is None:
        raise LoadError("bpftool not found: install Debian's bpftool (deploy/install.sh does)")
    done = subprocess.run(["bpftool", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise LoadError(f"bpftool {' '.join(args)}: {(done.stderr or done.stdout).strip()[-1500:]}")
    return done.stdout


def cgroup2_root() -> Path:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified)."""
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            return Path(parts[1])
    raise LoadError("no cgroup v2 hierarchy is mounted: cgroup BPF programs need one")


def ensure_bpffs() -> None:
    """Mount bpffs at /sys/fs/bpf if nothing is mounted there (it is not by default here)."""
    mounted = any(len(p) > 2 and p[1] == str(BPFFS) and p[2] == "bpf"
                  for p in (line.split() for line in Path("/proc/mounts").read_text().splitlines()))
    if not mounted:
        BPFFS.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "bpf", "bpf", str(BPFFS)], capture_output=True, text=True)
        if done.returncode != 0:
            raise LoadError(f"cannot mount bpffs at {BPFFS}: {done.stderr.strip()}")


def supported() -> str | None:
    """None when this host can run the eBPF data plane, else why not (for `--dataplane auto`)."""
    try:
        cgroup2_root()
        if shutil.which("bpftool") is None:
            return "bpftool is not installed"
        if not OBJECT.exists():
            build()
    except (LoadError, BuildError) as e:
        return str(e)
    return None


class NodePrograms:
    """The programs and maps of one node, attached to its container cgroup `cgroup` (relative to
    the cgroup v2 root, e.g. `ccattler/3fa2c1`)."""

    def __init__(self, node: str, cgroup: str) -> None:
        if not node or "/" in node or node.startswith("."):
            raise LoadError(f"bad node name for a bpffs pin: {node!r}")
        self.pins = BPFFS / "ccattler" / node
        self.cgroup = cgroup2_root() / cgroup

    def map_path(self, name: str) -> str:
        return str(self.pins / "maps" / name)

    def setup(self) -> None:
        """Load and pin (unless pinned already), then attach whatever is not attached."""
        ensure_bpffs()
        if not all((self.pins / "progs" / p).exists() for p in PROGRAMS) or \
                not all((self.pins / "maps" / m).exists() for m in MAPS):
            self._unpin()
            obj = build()
            self.pins.mkdir(parents=True, exist_ok=True)
            _bpftool("prog", "loadall", str(obj), str(self.pins / "progs"),
                     "pinmaps", str(self.pins / "maps"))
        self.cgroup.mkdir(parents=True, exist_ok=True)
        attached = self.attached()
        for prog, kind in PROGRAMS.items():
            mine = self.pinned_id(prog)
            for stale in attached.get(kind, {}).get(prog, set()) - {mine}:  # an earlier load's
                _bpftool("cgroup", "detach", str(self.cgroup), kind, "id", str(stale))
            if mine not in attached.get(kind, {}).get(prog, set()):
                path = self.pins / "progs" / prog
                _bpftool("cgroup", "attach", str(self.cgroup), kind, "pinned", str(path), "multi")

    def pinned_id(self, prog: str) -> int:
        shown = _bpftool("-j", "prog", "show", "pinned", str(self.pins / "progs" / prog))
        return int(json.loads(shown)["id"])

    def attached(self) -> dict[str, dict[str, set[int]]]:
        """attach type → program name → ids attached to the node cgroup."""
        if not self.cgroup.exists():
            return {}
        rows = json.loads(_bpftool("-j", "cgroup", "show", str(self.cgroup)).strip() or "[]")
        out: dict[str, dict[str, set[int]]] = {}
        for row in rows:
            kind = _ATTACH_TYPES.get(row.get("attach_type", ""), row.get("attach_type", ""))
            out.setdefault(kind, {}).setdefault(row.get("name", ""), set()).add(int(row["id"]))
        return out

    def teardown(self) -> list[str]:
        """Detach and unpin everything; returns what could not be removed (never raises)."""
        problems = []
        if self.cgroup.exists():
            attached = self.attached()
            for prog, kind in PROGRAMS.items():
                for prog_id in attached.get(kind, {}).get(prog, set()):
                    try:
                        _bpftool("cgroup", "detach", str(self.cgroup), kind, "id", str(prog_id))
                    except LoadError as e:
                        problems.append(str(e))
        problems += self._unpin()
        return problems

    def _unpin(self) -> list[str]:
        problems = []
        if self.pins.exists():
            for path in sorted(self.pins.rglob("*"), key=lambda p: -len(p.parts)):
                try:
                    path.rmdir() if path.is_dir() else path.unlink()
                except OSError as e:
                    problems.append(f"{path}: {e.strerror}")
            try:
                self.pins.rmdir()
            except OSError as e:
                problems.append(f"{self.pins}: {e.strerror}")
        return problems
