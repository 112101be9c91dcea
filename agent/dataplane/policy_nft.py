"""Network policy in nftables: table `inet cca_pol_<bridge>`, traffic INTO local instances.

Layout — Cilium's identity model in nftables (probe B3 variant B, ../shared/NETWORK-NOTES.md):
rules are fixed, every grant, revocation and relabel is a set element, so no change makes
libnftables re-read a table of thousands of rules (one rule per tuple cost ~1 s per grant at
1,000 services). State grows with addresses + identities × allowed tuples, never instance pairs.

    map ipcache     { type ipv4_addr : mark }      every address of a mentioned identity → its number
    map guarded     { type ipv4_addr : verdict }   local address of a default-deny identity → jump d_<h>
    set t_<h>       { type mark . inet_proto . inet_service }   allowed (source, protocol, port)
    set p_<h>       { type mark . inet_proto }                   allowed (source, protocol), any port
    set s_<h>       { type mark }                                allowed source, any port and protocol
    chain d_<h>     fixed: mark := source number, accept on a hit in t/p/s, else `counter drop`
    chain forward   hook forward: established/related accept, the bridge gateway (host, node-local
                    DNS) accept, then `ip daddr vmap @guarded`; everything else is left alone

Identity numbers (the packet mark, reset to 0 on the way out of d_<h> so nothing downstream sees
it) are this table's own: given in name order when the table is replaced (first apply, repair),
then the next free number for a new identity; never reused while the table lives.

Same-bridge traffic reaches the inet forward hook only with `net.bridge.bridge-nf-call-iptables=1`
in the node's network namespace (`ensure_bridge_filtering`); traffic from other nodes (overlay)
and through VIPs (DNAT happens before forward, the source address is kept) is routed into the bridge.

Every change is one nft transaction (atomic: a bad batch leaves the old state), through libnftables
in-process when the `nftables` module is there (no process spawned per change), else `nft -f -`.
The first replaces the table, later ones carry only changed elements (and the chain and sets of a
destination that became or stopped being default-deny).
Revocation: after a change, the conntrack entries towards each local address whose
policy changed are listed and the ones the new policy no longer allows are deleted (`conntrack -D`),
so established flows of a revoked pair end too. Fail closed: `admit(identity, ip)` puts a new
instance's address under its identity's policy before the agent starts its process.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ccattler.agent.dataplane.base import PolicyIngress

Runner = Callable[[Sequence[str], str | None], str]

_CONNTRACK_LINE = re.compile(r"^(?P<proto>tcp|udp)\s.*?src=(?P<src>\S+) dst=(?P<dst>\S+) "
                             r"sport=(?P<sport>\d+) dport=(?P<dport>\d+)")


class PolicyError(RuntimeError):
    """nft or conntrack refused a change; the message carries the tool's own words."""


def run_command(argv: Sequence[str], stdin: str | None = None) -> str:
    """Run a command; `nft -f -` goes to libnftables in this thread's network namespace when the
    `nftables` module (pip-nftables over Debian's libnftables1) is importable."""
    if list(argv) == ["nft", "-f", "-"] and (nft := _libnftables()) is not None:
        rc, out, err = nft.cmd(stdin or "")
        if rc != 0:
            raise PolicyError(f"nft -f - failed: {err.strip() or out.strip()}")
        return out
    done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PolicyError(f"{' '.join(argv[:3])} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


_local = threading.local()


def _libnftables():
    """One libnftables context per thread (a context is not thread-safe), or None without it."""
    if not hasattr(_local, "nft"):
        try:
            import nftables
        except (ImportError, OSError):  # no module, or no libnftables.so.1
            _local.nft = None
        else:
            _local.nft = nftables.Nftables()
            _local.nft.set_json_output(False)
    return _local.nft


def _h(identity: str) -> str:
    """A short stable nft name for an identity (identities contain `/`, names may not)."""
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PolicySet:
    """What the table enforces: identity → all its addresses, identity → ingress of a guarded one."""

    identities: Mapping[str, frozenset[str]]
    policies: Mapping[str, PolicyIngress]

    def allows(self, destination: str, source_ip: str, port: int, protocol: str) -> bool:
        ingress = self.policies[destination]
        for source, p, proto in ingress.allowed:
            if source_ip in self.identities.get(source, ()) and p in (0, port) and proto in ("any", protocol):
                return True
        return False


def _mentioned(state: PolicySet) -> set[str]:
    return set(state.identities) | {s for p in state.policies.values() for s, _, _ in p.allowed}


def numbered(state: PolicySet, numbers: Mapping[str, int] | None = None) -> dict[str, int]:
    """Identity → mark for every identity `state` mentions: kept from `numbers`, new ones after the
    highest given (or from 1, in name order, when `numbers` is None: a replaced table)."""
    out = {n: i for n, i in (numbers or {}).items() if n in _mentioned(state)}
    top = max((numbers or {}).values(), default=0)
    for name in sorted(_mentioned(state) - set(out)):
        top += 1
        out[name] = top
    return out


def _elements(ingress: PolicyIngress, numbers: Mapping[str, int]) -> dict[str, set[str]]:
    """The t_/p_/s_ set elements of one guarded identity's allowed tuples."""
    out: dict[str, set[str]] = {"t": set(), "p": set(), "s": set()}
    for source, port, protocol in ingress.allowed:
        mark = numbers[source]
        protos = ("tcp", "udp") if protocol == "any" else (protocol,)
        if port:
            out["t"] |= {f"{mark} . {proto} . {port}" for proto in protos}
        elif protocol == "any":
            out["s"].add(str(mark))
        else:
            out["p"].add(f"{mark} . {protocol}")
    return out


_SET_TYPES = {"t": "mark . inet_proto . inet_service", "p": "mark . inet_proto", "s": "mark"}


def _ipcache(state: PolicySet, numbers: Mapping[str, int]) -> dict[str, int]:
    # An address listed under two identities (a moment of a move) keeps the first in name order.
    out: dict[str, int] = {}
    for name in sorted(state.identities):
        for ip in state.identities[name]:
            out.setdefault(ip, numbers[name])
    return out


def _destination(table: str, destination: str, ingress: PolicyIngress,
                 numbers: Mapping[str, int]) -> list[str]:
    """Commands that create one guarded identity's counter, sets and fixed chain."""
    h = _h(destination)
    out = [f"add counter inet {table} drop_{h} {{ comment \"{destination}\"; }}"]
    for kind, elements in _elements(ingress, numbers).items():
        listed = f" elements = {{ {', '.join(sorted(elements))} }};" if elements else ""
        out.append(f"add set inet {table} {kind}_{h} {{ type {_SET_TYPES[kind]};{listed} }}")
    out += [f"add chain inet {table} d_{h}",
            f"add rule inet {table} d_{h} meta mark set 0",
            f"add rule inet {table} d_{h} meta mark set ip saddr map @ipcache",
            f"add rule inet {table} d_{h} meta mark . meta l4proto . th dport @t_{h} meta mark set 0 accept",
            f"add rule inet {table} d_{h} meta mark . meta l4proto @p_{h} meta mark set 0 accept",
            f"add rule inet {table} d_{h} meta mark @s_{h} meta mark set 0 accept",
            f"add rule inet {table} d_{h} meta mark set 0 counter name drop_{h} drop"]
    return out


def _map_line(table: str, verb: str, name: str, entries: Mapping[str, str]) -> list[str]:
    if not entries:
        return []
    return [f"{verb} element inet {table} {name} {{ "
            + ", ".join(f"{k} : {v}" for k, v in sorted(entries.items())) + " }"]


def render(table: str, gateway: str | None, state: PolicySet, numbers: Mapping[str, int]) -> str:
    """The nft script that replaces `table` with `state` in one transaction."""
    lines = [f"table inet {table}", f"delete table inet {table}", f"add table inet {table}",
             f"add map inet {table} ipcache {{ type ipv4_addr : mark; }}",
             f"add map inet {table} guarded {{ type ipv4_addr : verdict; }}"]
    for destination, ingress in sorted(state.policies.items()):
        lines += _destination(table, destination, ingress, numbers)
    lines += _map_line(table, "add", "ipcache", {ip: str(n) for ip, n in _ipcache(state, numbers).items()})
    lines += _map_line(table, "add", "guarded", {ip: f"jump d_{_h(d)}" for d, p in state.policies.items()
                                                 for ip in p.local_ips})
    hook = "type filter hook forward priority filter - 5; policy accept;"
    lines += [f"add chain inet {table} forward {{ {hook} }}",
              f"add rule inet {table} forward ct state established,related accept"]
    if gateway:
        lines.append(f"add rule inet {table} forward ip saddr {gateway} accept")
    lines.append(f"add rule inet {table} forward ip daddr vmap @guarded")
    return "\n".join(lines) + "\n"


def render_delta(table: str, old: PolicySet, new: PolicySet, old_numbers: Mapping[str, int],
                 numbers: Mapping[str, int]) -> str:
    """The nft script that turns `old` into `new` element by element (one transaction): a grant,
    a revocation or a relabel is a few set elements; only a destination that becomes (or stops
    being) default-deny adds (or deletes) its chain and sets."""
    out: list[str] = []
    for destination, ingress in sorted(new.policies.items()):
        previous = old.policies.get(destination)
        if previous is None:
            out += _destination(table, destination, ingress, numbers)
            continue
        h = _h(destination)
        before, after = _elements(previous, old_numbers), _elements(ingress, numbers)
        for kind in _SET_TYPES:
            if gone := before[kind] - after[kind]:
                out.append(f"delete element inet {table} {kind}_{h} {{ {', '.join(sorted(gone))} }}")
            if added := after[kind] - before[kind]:
                out.append(f"add element inet {table} {kind}_{h} {{ {', '.join(sorted(added))} }}")
    cache_old, cache_new = _ipcache(old, old_numbers), _ipcache(new, numbers)
    out += _map_line(table, "delete", "ipcache", {ip: str(n) for ip, n in cache_old.items()
                                                  if cache_new.get(ip) != n})
    out += _map_line(table, "add", "ipcache", {ip: str(n) for ip, n in cache_new.items()
                                               if cache_old.get(ip) != n})
    jumps_old = {ip: d for d, p in old.policies.items() for ip in p.local_ips}
    jumps_new = {ip: d for d, p in new.policies.items() for ip in p.local_ips}
    out += _map_line(table, "delete", "guarded", {ip: f"jump d_{_h(d)}" for ip, d in jumps_old.items()
                                                  if jumps_new.get(ip) != d})
    out += _map_line(table, "add", "guarded", {ip: f"jump d_{_h(d)}" for ip, d in jumps_new.items()
                                               if jumps_old.get(ip) != d})
    for destination in sorted(set(old.policies) - set(new.policies)):  # after its jumps are gone
        h = _h(destination)
        out.append(f"delete chain inet {table} d_{h}")
        out += [f"delete set inet {table} {kind}_{h}" for kind in _SET_TYPES]
        out.append(f"delete counter inet {table} drop_{h}")
    return "\n".join(out) + "\n"


class PolicyTables:
    """One node's policy table for bridge `bridge` (gateway: the bridge address, host and DNS)."""

    def __init__(self, bridge: str, gateway: str | None = None, run: Runner = run_command) -> None:
        self.table = f"cca_pol_{bridge}"
        self.gateway = gateway
        self._run = run
        self.state = PolicySet({}, {})
        self.numbers: dict[str, int] = {}  # identity → its mark in this table
        self.transactions = 0
        self.replaced = 0  # full-table transactions (first apply, or repair after drift)

    def ensure_bridge_filtering(self) -> None:
        """Bridged (same-node) IPv4 traffic passes the inet forward hook (per network namespace)."""
        self._run(["sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"], None)

    def apply(self, identities: Mapping[str, frozenset[str]], policies: Mapping[str, PolicyIngress]) -> None:
        """Enforce the new state in one transaction, then cut the established flows it revokes."""
        new = PolicySet(dict(identities), dict(policies))
        if new == self.state:
            return
        old = self.state
        if self.transactions:
            numbers = numbered(new, self.numbers)
            try:
                self._run(["nft", "-f", "-"], render_delta(self.table, old, new, self.numbers, numbers))
                self.numbers = numbers
            except PolicyError:  # the kernel drifted from what we programmed: replace the table
                self._replace(new)
        else:  # first apply (or after a restart): replace whatever is there
            self._replace(new)
        self.transactions += 1
        self.state = new
        self._cut_revoked(old, new)

    def _replace(self, state: PolicySet) -> None:
        numbers = numbered(state)
        self._run(["nft", "-f", "-"], render(self.table, self.gateway, state, numbers))
        self.numbers = numbers
        self.replaced += 1

    def admit(self, identity: str, ip: str) -> None:
        """Fail closed: before an instance of `identity` at `ip` starts, its address is under its
        identity's policy (and in the identity's set) in the kernel. Open identities need nothing."""
        ingress = self.state.policies.get(identity)
        if ingress is None or ip in ingress.local_ips:
            return
        identities = dict(self.state.identities)
        identities[identity] = frozenset(identities.get(identity, frozenset())) | {ip}
        policies = dict(self.state.policies)
        policies[identity] = replace(ingress, local_ips=ingress.local_ips | {ip})
        self.apply(identities, policies)

    def teardown(self) -> None:
        self._run(["nft", "-f", "-"], f"table inet {self.table}\ndelete table inet {self.table}\n")
        self.state, self.numbers = PolicySet({}, {}), {}

    def counters(self) -> dict[str, int]:
        """Dropped packets per guarded identity (from the kernel)."""
        out = self._run(["nft", "list", "counters", "table", "inet", self.table], None)
        found, current = {}, None
        for line in out.splitlines():
            comment = re.search(r'comment "([^"]+)"', line)
            if comment:
                current = comment.group(1)
            packets = re.search(r"packets (\d+)", line)
            if packets and current:
                found[current] = int(packets.group(1))
        return found

    def _cut_revoked(self, old: PolicySet, new: PolicySet) -> None:
        for destination, ingress in new.policies.items():
            before = old.policies.get(destination)
            unchanged = before is not None and before.allowed == ingress.allowed and all(
                old.identities.get(s) == new.identities.get(s) for s, _, _ in ingress.allowed)
            if unchanged:
                continue
            for ip in sorted(ingress.local_ips):
                self._cut_flows_to(ip, destination, new)

    def _cut_flows_to(self, ip: str, destination: str, state: PolicySet) -> None:
        try:
            listed = self._run(["conntrack", "-L", "-d", ip], None)
        except PolicyError:
            return  # no entries (conntrack exits 1 on some versions when nothing matches)
        for line in listed.splitlines():
            m = _CONNTRACK_LINE.match(line)
            if not m or m["dst"] != ip or m["src"] == self.gateway:
                continue
            if state.allows(destination, m["src"], int(m["dport"]), m["proto"]):
                continue
            try:
                self._run(["conntrack", "-D", "-p", m["proto"], "-s", m["src"], "-d", ip,
                           "--sport", m["sport"], "--dport", m["dport"]], None)
            except PolicyError:
                pass  # the flow ended meanwhile
