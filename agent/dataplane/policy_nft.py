"""Network policy in nftables: table `inet cca_pol_<bridge>`, traffic INTO local instances.

Layout (state grows with identities and allowed tuples, never with instance pairs):

    set i_<h>       { type ipv4_addr }             every address of one identity (cluster-wide)
    map guarded     { type ipv4_addr : verdict }   local address of a default-deny identity → jump d_<h>
    chain d_<h>     one rule per allowed (source identity, port, protocol), then `counter drop`
    chain forward   hook forward: established/related accept, the bridge gateway (host, node-local
                    DNS) accept, then `ip daddr vmap @guarded`; everything else is left alone

Same-bridge traffic reaches the inet forward hook only with `net.bridge.bridge-nf-call-iptables=1`
in the node's network namespace (`ensure_bridge_filtering`); traffic from other nodes (overlay)
and through VIPs (DNAT happens before forward, the source address is kept) is routed into the bridge.

Every change is one `nft -f -` transaction (atomic: a bad batch leaves the old state): the first
replaces the table, later ones carry only the difference (set elements, one chain per changed
destination), so a grant or a relabel costs a few elements, not the whole table.
Revocation: after a change, the conntrack entries towards each local address whose
policy changed are listed and the ones the new policy no longer allows are deleted (`conntrack -D`),
so established flows of a revoked pair end too. Fail closed: `admit(identity, ip)` puts a new
instance's address under its identity's policy before the agent starts its process.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ccattler.agent.dataplane.base import PolicyIngress

Runner = Callable[[Sequence[str], str | None], str]

_CONNTRACK_LINE = re.compile(r"^(?P<proto>tcp|udp)\s.*?src=(?P<src>\S+) dst=(?P<dst>\S+) "
                             r"sport=(?P<sport>\d+) dport=(?P<dport>\d+)")


class PolicyError(RuntimeError):
    """nft or conntrack refused a change; the message carries the tool's own words."""


def run_command(argv: Sequence[str], stdin: str | None = None) -> str:
    done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PolicyError(f"{' '.join(argv[:3])} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


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


def _rule(source: str, port: int, protocol: str) -> str:
    match = f"ip saddr @i_{_h(source)}"
    protos = "{ tcp, udp }" if protocol == "any" else protocol
    if port:
        return f"{match} meta l4proto {protos} th dport {port} accept"
    return f"{match} accept" if protocol == "any" else f"{match} meta l4proto {protocol} accept"


def render(table: str, gateway: str | None, state: PolicySet) -> str:
    """The nft script that replaces `table` with `state` in one transaction."""
    lines = [f"table inet {table}", f"delete table inet {table}", f"table inet {table} {{"]
    mentioned = set(state.identities) | {s for p in state.policies.values() for s, _, _ in p.allowed}
    for identity in sorted(mentioned):
        addresses = sorted(state.identities.get(identity, ()))
        elements = f" elements = {{ {', '.join(addresses)} }};" if addresses else ""
        lines.append(f"  set i_{_h(identity)} {{ type ipv4_addr; comment \"{identity}\";{elements} }}")
    jumps = [f"{ip} : jump d_{_h(d)}" for d, p in sorted(state.policies.items())
             for ip in sorted(p.local_ips)]
    elements = f" elements = {{ {', '.join(jumps)} }};" if jumps else ""
    lines.append(f"  map guarded {{ type ipv4_addr : verdict;{elements} }}")
    for destination, ingress in sorted(state.policies.items()):
        name = _h(destination)
        lines.append(f"  counter drop_{name} {{ comment \"{destination}\"; }}")
        lines.append(f"  chain d_{name} {{")
        lines += [f"    {_rule(*t)}" for t in sorted(ingress.allowed)]
        lines.append(f"    counter name drop_{name} drop")
        lines.append("  }")
    lines.append("  chain forward {")
    lines.append("    type filter hook forward priority filter - 5; policy accept;")
    lines.append("    ct state established,related accept")
    if gateway:
        lines.append(f"    ip saddr {gateway} accept")
    lines.append("    ip daddr vmap @guarded")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mentioned(state: PolicySet) -> set[str]:
    return set(state.identities) | {s for p in state.policies.values() for s, _, _ in p.allowed}


def _set_line(identity: str, addresses: frozenset[str]) -> str:
    elements = f" elements = {{ {', '.join(sorted(addresses))} }};" if addresses else ""
    return f"add set inet {{t}} i_{_h(identity)} {{{{ type ipv4_addr; comment \"{identity}\";{elements} }}}}"


def render_delta(table: str, old: PolicySet, new: PolicySet) -> str:
    """The nft script that turns `old` into `new` element by element and chain by chain (one
    transaction): a relabel or a grant touches a few elements or one chain, not the table."""
    out: list[str] = []
    was, now = _mentioned(old), _mentioned(new)
    for identity in sorted(now - was):
        out.append(_set_line(identity, new.identities.get(identity, frozenset())).format(t=table))
    for identity in sorted(now & was):
        before, after = old.identities.get(identity, frozenset()), new.identities.get(identity, frozenset())
        name = f"i_{_h(identity)}"
        if after - before:
            out.append(f"add element inet {table} {name} {{ {', '.join(sorted(after - before))} }}")
        if before - after:
            out.append(f"delete element inet {table} {name} {{ {', '.join(sorted(before - after))} }}")
    for destination, ingress in sorted(new.policies.items()):
        name = _h(destination)
        previous = old.policies.get(destination)
        if previous is None:
            out.append(f"add counter inet {table} drop_{name} {{ comment \"{destination}\"; }}")
            out.append(f"add chain inet {table} d_{name}")
        if previous is None or previous.allowed != ingress.allowed:
            out.append(f"flush chain inet {table} d_{name}")
            out += [f"add rule inet {table} d_{name} {_rule(*t)}" for t in sorted(ingress.allowed)]
            out.append(f"add rule inet {table} d_{name} counter name drop_{name} drop")
    jumps_old = {ip: d for d, p in old.policies.items() for ip in p.local_ips}
    jumps_new = {ip: d for d, p in new.policies.items() for ip in p.local_ips}
    gone = sorted(ip for ip in jumps_old if jumps_new.get(ip) != jumps_old[ip])
    if gone:
        out.append(f"delete element inet {table} guarded {{ {', '.join(gone)} }}")
    added = sorted(ip for ip in jumps_new if jumps_old.get(ip) != jumps_new[ip])
    if added:
        out.append(f"add element inet {table} guarded {{ "
                   + ", ".join(f"{ip} : jump d_{_h(jumps_new[ip])}" for ip in added) + " }")
    for destination in sorted(set(old.policies) - set(new.policies)):
        out.append(f"delete chain inet {table} d_{_h(destination)}")
        out.append(f"delete counter inet {table} drop_{_h(destination)}")
    for identity in sorted(was - now):
        out.append(f"delete set inet {table} i_{_h(identity)}")
    return "\n".join(out) + "\n"


class PolicyTables:
    """One node's policy table for bridge `bridge` (gateway: the bridge address, host and DNS)."""

    def __init__(self, bridge: str, gateway: str | None = None, run: Runner = run_command) -> None:
        self.table = f"cca_pol_{bridge}"
        self.gateway = gateway
        self._run = run
        self.state = PolicySet({}, {})
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
            try:
                self._run(["nft", "-f", "-"], render_delta(self.table, old, new))
            except PolicyError:  # the kernel drifted from what we programmed: replace the table
                self._replace(new)
        else:  # first apply (or after a restart): replace whatever is there
            self._replace(new)
        self.transactions += 1
        self.state = new
        self._cut_revoked(old, new)

    def _replace(self, state: PolicySet) -> None:
        self._run(["nft", "-f", "-"], render(self.table, self.gateway, state))
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
        self.state = PolicySet({}, {})

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
