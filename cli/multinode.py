"""`cca up --nodes N`: several real nodes on one machine. Each node is a network namespace with
its own underlay address (a veth `eth0` to a host bridge on a private /24, the host bridge holding
.1 where the API server listens) and its own agent process started inside it (`nsenter --net`,
which leaves the mount namespace alone so the pins the agent makes under /run/netns stay visible to
`cca down`). Inside, each agent has its own container bridge, nftables, runc state and subnet, and
the VXLAN overlay joins the nodes' container subnets over the underlay."""

from __future__ import annotations

import ipaddress
import secrets
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from ccattler.engine.facts import CcaError

DEFAULT_UNDERLAY = "10.213.0.0/24"


@dataclass(frozen=True, slots=True)
class Underlay:
    """The host side of the nodes: bridge, its address, and per node a netns, veth and address."""

    tag: str
    bridge: str
    host: str
    prefixlen: int
    nodes: dict[str, dict[str, str]]  # node → {"netns", "veth", "address"}

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def plan(count: int, underlay: str = DEFAULT_UNDERLAY, tag: str | None = None) -> Underlay:
        try:
            net = ipaddress.IPv4Network(underlay)
        except ValueError as exc:
            raise CcaError(f"--underlay {underlay!r}: {exc}") from None
        if count < 1 or count > net.num_addresses - 3:
            raise CcaError(f"--nodes {count}: the underlay {net} holds 1 to {net.num_addresses - 3} nodes")
        tag = tag or secrets.token_hex(2)
        hosts = list(net.hosts())
        nodes = {f"node-{i}": {"netns": f"cca-{tag}-node-{i}", "veth": f"ccau{tag}{i}",
                               "address": str(hosts[i])} for i in range(1, count + 1)}
        return Underlay(tag, f"ccau{tag}", str(hosts[0]), net.prefixlen, nodes)

    def create(self) -> None:
        """The bridge, namespaces and veths (removed again if any step fails)."""
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.host}/{self.prefixlen}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for node in self.nodes.values():
                ns = node["netns"]
                _ip("netns", "add", ns)
                _ip("link", "add", node["veth"], "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("link", "set", node["veth"], "master", self.bridge, "up")
                _ip("-n", ns, "addr", "add", f"{node['address']}/{self.prefixlen}", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "route", "add", "default", "via", self.host)
                _run("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        except BaseException:
            self.destroy()
            raise

    def destroy(self) -> list[str]:
        """Remove the namespaces (their veths go with them) and the bridge; what could not go."""
        problems = []
        from ccattler.agent.net import netns

        for node in self.nodes.values():
            if _exists("netns", node["netns"]):
                try:  # lazy and repeated unmounts: a busy or stacked pin does not stop the rest
                    netns.remove(node["netns"])
                except OSError as exc:
                    problems.append(f"namespace {node['netns']}: {exc}")
        if _exists("link", self.bridge):
            problems += _try("ip", "link", "del", self.bridge)
        return problems

    def enter(self, node: str) -> list[str]:
        """The command prefix that runs a process in `node`'s network namespace."""
        return ["nsenter", f"--net=/run/netns/{self.nodes[node]['netns']}", "--"]


def seed_images(state: Path, node_state: Path) -> None:
    """Give a node the images already built in the machine's state dir (hard links: no copy), so
    `cca image build-busybox` once serves every node."""
    if (state / "images").is_dir() and not (node_state / "images").exists():
        node_state.mkdir(parents=True, exist_ok=True)
        _run("cp", "-a", "--link", str(state / "images"), str(node_state / "images"))


def _exists(kind: str, name: str) -> bool:
    if kind == "netns":
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return any(line.split()[0] == name for line in out.splitlines() if line.strip())
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def _ip(*args: str) -> None:
    _run("ip", *args)


def _run(*args: str) -> None:
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise CcaError(f"{' '.join(args)}: {result.stderr.strip() or 'failed'}")


def _try(*args: str) -> list[str]:
    result = subprocess.run(args, capture_output=True, text=True)
    return [] if result.returncode == 0 else [f"{' '.join(args)}: {result.stderr.strip()}"]
