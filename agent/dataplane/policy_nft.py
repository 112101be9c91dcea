"""Network policy in nftables: table `inet cca_pol_<bridge>`, traffic INTO local instances.

Layout — Cilium's identity model in nftables (probe B3 variant B, ../shared/NETWORK-NOTES.md):
rules are fixed, every grant, revocation and relabel is a set element, so no change makes
libnftables re-read a table of thousands of rules (one rule per tuple cost ~0.7 s per grant at
10,000 services). State grows with addresses + identities × allowed tuples, never instance pairs.

    set names       { type mark }                  identity number, its name as the element comment
    map ipcache     { type ipv4_addr : mark }      every address of a mentioned identity → its number
    map guarded     { type ipv4_addr : verdict }   local address of a default-deny identity → jump d_<h>
    counter drop_<h>                               drops into one guarded identity (comment: its name)
    set t_<h>       { type mark . inet_proto . inet_service }   allowed (source, protocol, port)
    set p_<h>       { type mark . inet_proto }                   allowed (source, protocol), any port
    set s_<h>       { type mark }                                allowed source, any port and protocol
                    (each with `counter`: per element, the new connections it admitted — the chain
                    sees no packet of an established flow; `tuple_counters()` reads them)
    chain d_<h>     fixed: mark := source number, accept on a hit in t/p/s, else `counter drop`
    chain forward   hook forward: established/related accept, a new TCP flow not started by a SYN
                    dropped (no mid-stream pickup of a cut flow), the bridge gateway (host,
                    node-local DNS) accept, then `ip daddr vmap @guarded`; everything else is left alone

Identity numbers (the packet mark, reset to 0 on the way out of d_<h> so nothing downstream sees
it) are this table's own: given in name order when the table is replaced, then the next number
above the highest in use for a new identity. `programmed()` reads the table back (names from the
element comments and counter comments), so a restarted agent repairs the difference and keeps the
numbers; the nftables data plane reports policy through the same reader. A port allowed for both
tcp and udp reads back as protocol `any` (the same elements).

Same-bridge traffic reaches the inet forward hook only with `net.bridge.bridge-nf-call-iptables=1`
in the node's network namespace (`ensure_bridge_filtering`); traffic from other nodes (overlay)
and through VIPs (DNAT happens before forward, the source address is kept) is routed into the bridge.

Every change is one nft transaction (atomic: a bad batch leaves the old state), through libnftables
in-process (agent/dataplane/libnft.py: no process spawned per change) with the default runner.
The first apply reads the table back and sends the difference (a missing table, another layout or
a hand-edited chain: the table is replaced); later ones carry only changed elements (and the chain
and sets of a destination that became or stopped being default-deny); a refused delta replaces it.
Revocation: after a change that takes something away (a tuple revoked, an address leaving an
allowed source's identity, a local address newly guarded; a grant takes nothing), the conntrack
entries towards each local address of that destination are listed — by reply source, so flows
opened to a VIP and DNAT-ed to the address count too — and the ones the new policy no longer
allows are deleted (`conntrack -D`), so established flows of a revoked pair end too.
Fail closed: `admit(identity, ip)` puts a new instance's address under its identity's policy
before the agent starts its process.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ccattler.agent.dataplane import conntrack, libnft
from ccattler.agent.dataplane.base import PolicyIngress

Runner = Callable[[Sequence[str], str | None], str]

_IP = r"(\d+\.\d+\.\d+\.\d+)"
_NUM = r"(0x[0-9a-f]+|\d+)"
_BLOCK = re.compile(r"^\t(map|set|chain|counter) (\w+) \{\n(.*?)^\t\}", re.M | re.S)
_FORWARD_HOOK = "type filter hook forward priority filter - 5; policy accept;"
_COUNTED = re.compile(r" counter packets (\d+) bytes \d+")
_ELEMENT = re.compile(r"(?P<elem>(?:0x[0-9a-f]+|\d+)(?: \. \w+)*)"
                      r"(?: counter packets (?P<packets>\d+) bytes \d+)?")  # a listed set element


class PolicyError(RuntimeError):
    """nft or conntrack refused a change; the message carries the tool's own words."""


def run_command(argv: Sequence[str], stdin: str | None = None) -> str:
    """Run a command as a process (`PolicyTables` sends nft in-process instead when given this)."""
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


@dataclass(frozen=True)
class Programmed:
    """The policy table as the kernel holds it: the state and the identity numbers it uses."""

    state: PolicySet
    numbers: Mapping[str, int]


def _mentioned(state: PolicySet) -> set[str]:
    return set(state.identities) | {s for p in state.policies.values() for s, _, _ in p.allowed}


def numbered(state: PolicySet, numbers: Mapping[str, int] | None = None) -> dict[str, int]:
    """Identity → mark for every identity `state` mentions: kept from `numbers`, new ones above the
    highest given (or from 1, in name order, when `numbers` is None: a replaced table)."""
    mentioned = _mentioned(state)
    out = {n: i for n, i in (numbers or {}).items() if n in mentioned}
    top = max((numbers or {}).values(), default=0)
    for name in sorted(mentioned - set(out)):
        top += 1
        out[name] = top
    return out


def _elements(allowed: Iterable[tuple[str, int, str]], numbers: Mapping[str, int]) -> dict[str, set[str]]:
    """The t_/p_/s_ set elements of (some of) one guarded identity's allowed tuples."""
    out: dict[str, set[str]] = {"t": set(), "p": set(), "s": set()}
    for source, port, protocol in allowed:
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


def _fixed_rules(h: str) -> list[str]:
    """One guarded identity's chain, written as `nft list` shows it (the read-back compares)."""
    reset = "meta mark set 0x00000000"
    return [reset,
            "meta mark set ip saddr map @ipcache",
            f"meta mark . meta l4proto . th dport @t_{h} {reset} accept",
            f"meta mark . meta l4proto @p_{h} {reset} accept",
            f"meta mark @s_{h} {reset} accept",
            f'{reset} counter name "drop_{h}" drop']


def _forward_rules(gateway: str | None) -> list[str]:
    # A TCP packet that is not a SYN has no business starting a tracked flow: with the kernel's
    # loose pickup (nf_conntrack_tcp_loose=1, the default) the server's retransmission of a flow
    # whose entry a revocation deleted would be tracked as a new flow *from* the guarded address,
    # and the client's next packets would pass as its replies (the flow revived, about one run in
    # four in tests/agent/dataplane/test_nftables_traffic.py). Written as nft lists it (read-back).
    return ["ct state established,related accept",
            "ct state new tcp flags != syn / fin,syn,rst,ack drop",
            *([f"ip saddr {gateway} accept"] if gateway else []),
            "ip daddr vmap @guarded"]


def _destination(table: str, destination: str, ingress: PolicyIngress,
                 numbers: Mapping[str, int]) -> list[str]:
    """Commands that create one guarded identity's counter, sets and fixed chain."""
    h = _h(destination)
    out = [f"add counter inet {table} drop_{h} {{ comment \"{destination}\"; }}"]
    for kind, elements in _elements(ingress.allowed, numbers).items():
        listed = f" elements = {{ {', '.join(sorted(elements))} }};" if elements else ""
        out.append(f"add set inet {table} {kind}_{h} {{ type {_SET_TYPES[kind]}; counter;{listed} }}")
    out.append(f"add chain inet {table} d_{h}")
    out += [f"add rule inet {table} d_{h} {rule}" for rule in _fixed_rules(h)]
    return out


def _map_line(table: str, verb: str, name: str, entries: Mapping[str, str]) -> list[str]:
    if not entries:
        return []
    return [f"{verb} element inet {table} {name} {{ "
            + ", ".join(f"{k} : {v}" for k, v in sorted(entries.items())) + " }"]


def _names_line(table: str, verb: str, numbers: Mapping[str, int]) -> list[str]:
    if not numbers:
        return []
    if verb == "delete":
        listed = ", ".join(str(n) for n in sorted(numbers.values()))
        return [f"delete element inet {table} names {{ {listed} }}"]
    return [f"add element inet {table} names {{ "
            + ", ".join(f'{n} comment "{name}"' for name, n in sorted(numbers.items())) + " }"]


def render(table: str, gateway: str | None, state: PolicySet, numbers: Mapping[str, int]) -> str:
    """The nft script that replaces `table` with `state` in one transaction."""
    lines = [f"table inet {table}", f"delete table inet {table}", f"add table inet {table}",
             f"add set inet {table} names {{ type mark; }}",
             f"add map inet {table} ipcache {{ type ipv4_addr : mark; }}",
             f"add map inet {table} guarded {{ type ipv4_addr : verdict; }}"]
    lines += _names_line(table, "add", numbers)
    for destination, ingress in sorted(state.policies.items()):
        lines += _destination(table, destination, ingress, numbers)
    lines += _map_line(table, "add", "ipcache", {ip: str(n) for ip, n in _ipcache(state, numbers).items()})
    lines += _map_line(table, "add", "guarded", {ip: f"jump d_{_h(d)}" for d, p in state.policies.items()
                                                 for ip in p.local_ips})
    lines.append(f"add chain inet {table} forward {{ {_FORWARD_HOOK} }}")
    lines += [f"add rule inet {table} forward {rule}" for rule in _forward_rules(gateway)]
    return "\n".join(lines) + "\n"


def render_delta(table: str, old: PolicySet, new: PolicySet, old_numbers: Mapping[str, int],
                 numbers: Mapping[str, int]) -> str:
    """The nft script that turns `old` into `new` element by element (one transaction; empty when
    nothing differs): a grant, a revocation or a relabel is a few set elements; only a destination
    that becomes (or stops being) default-deny adds (or deletes) its chain and sets."""
    out: list[str] = []
    out += _names_line(table, "delete", {n: i for n, i in old_numbers.items() if numbers.get(n) != i})
    out += _names_line(table, "add", {n: i for n, i in numbers.items() if old_numbers.get(n) != i})
    for destination, ingress in sorted(new.policies.items()):
        previous = old.policies.get(destination)
        if previous is None:
            out += _destination(table, destination, ingress, numbers)
            continue
        changed = previous.allowed ^ ingress.allowed
        if not changed:
            continue  # a kept identity keeps its number: the same tuples are the same elements
        # elements are per source: only the changed tuples' sources can gain or lose one
        touched = {source for source, _, _ in changed}
        h = _h(destination)
        before = _elements((t for t in previous.allowed if t[0] in touched), old_numbers)
        after = _elements((t for t in ingress.allowed if t[0] in touched), numbers)
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
    return "\n".join(out) + "\n" if out else ""


def _plain(element: str) -> str:
    """A listed element as `_elements` writes it (marks as decimal: nft lists them in hex)."""
    first, sep, rest = element.partition(" . ")
    return str(int(first, 0)) + sep + rest


def _listed_rules(body: str) -> list[str]:
    return [line.strip() for line in body.splitlines() if line.strip()]


def parse(text: str, gateway: str | None) -> Programmed | None:
    """The state in an `nft list table inet cca_pol_…` listing, or None when the table is not this
    layout (another layout, a chain edited by hand, a jump to a missing chain: replace it)."""
    blocks = {(kind, name): body for kind, name, body in _BLOCK.findall(text)}

    def elements(kind: str, name: str) -> str:
        return _COUNTED.sub("", blocks.get((kind, name), "").partition("elements = ")[2])

    fixed = {("set", "names"), ("map", "ipcache"), ("map", "guarded"), ("chain", "forward")}
    if not fixed <= set(blocks):
        return None
    forward = _listed_rules(blocks[("chain", "forward")])
    if forward != [_FORWARD_HOOK, *_forward_rules(gateway)]:
        return None
    named = re.findall(rf'{_NUM} comment "([^"]*)"', elements("set", "names"))
    marks = {int(n, 0): name for n, name in named}
    destinations = {name[5:]: m.group(1) for (kind, name), body in blocks.items()
                    if kind == "counter" and name.startswith("drop_")
                    and (m := re.search(r'comment "([^"]*)"', body))}
    known = fixed | {(kind, f"{prefix}_{h}") for h in destinations
                     for kind, prefix in (("counter", "drop"), ("chain", "d"), ("set", "t"), ("set", "p"),
                                          ("set", "s"))}
    if set(blocks) != known:
        return None  # a leftover of another layout, or a destination missing a part
    if any(_listed_rules(blocks[("chain", f"d_{h}")]) != _fixed_rules(h) for h in destinations):
        return None
    identities: dict[str, set[str]] = {name: set() for name in marks.values()}
    for ip, n in re.findall(rf"{_IP} : {_NUM}", elements("map", "ipcache")):
        if int(n, 0) not in marks:
            return None
        identities[marks[int(n, 0)]].add(ip)
    local: dict[str, set[str]] = {h: set() for h in destinations}
    for ip, h in re.findall(rf"{_IP} : jump d_(\w+)", elements("map", "guarded")):
        if h not in local:
            return None
        local[h].add(ip)
    policies = {}
    for h, destination in destinations.items():
        tuples: dict[tuple[int, int], set[str]] = {}
        for n, proto, port in re.findall(rf"{_NUM} \. (tcp|udp) \. (\d+)", elements("set", f"t_{h}")):
            tuples.setdefault((int(n, 0), int(port)), set()).add(proto)
        allowed = {(n, port, "any" if protos == {"tcp", "udp"} else proto)
                   for (n, port), protos in tuples.items() for proto in protos}
        allowed |= {(int(n, 0), 0, proto)
                    for n, proto in re.findall(rf"{_NUM} \. (tcp|udp)", elements("set", f"p_{h}"))}
        allowed |= {(int(n, 0), 0, "any") for n in re.findall(_NUM, elements("set", f"s_{h}"))}
        if any(n not in marks for n, _, _ in allowed):
            return None
        sources = frozenset((marks[n], port, proto) for n, port, proto in allowed)
        policies[destination] = PolicyIngress(destination, frozenset(local[h]), sources)
    state = PolicySet({name: frozenset(ips) for name, ips in identities.items()}, policies)
    return Programmed(state, {name: n for n, name in marks.items()})


class PolicyTables:
    """One node's policy table for bridge `bridge` (gateway: the bridge address, host and DNS).
    The default runner sends nft in-process (libnftables), everything else as processes."""

    def __init__(self, bridge: str, gateway: str | None = None, run: Runner = run_command) -> None:
        self.table = f"cca_pol_{bridge}"
        self.gateway = gateway
        self._run = libnft.runner(run, PolicyError) if run is run_command else run
        self.state = PolicySet({}, {})
        self.numbers: dict[str, int] = {}  # identity → its mark in this table
        self._known = False  # state/numbers are the kernel's (programmed or read back)
        self.transactions = 0
        self.replaced = 0  # full-table transactions (no table, another layout, or a refused delta)

    def ensure_bridge_filtering(self) -> None:
        """Bridged (same-node) IPv4 traffic passes the inet forward hook (per network namespace)."""
        self._run(["sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"], None)

    def listing(self) -> str | None:
        """The table as `nft list table` prints it (None: no table)."""
        try:
            return self._run(["nft", "list", "table", "inet", self.table], None)
        except PolicyError:
            return None

    def programmed(self, text: str | None = None) -> Programmed | None:
        """What the kernel's table holds (None: no table, or not this layout); `text`: a listing
        already read (`listing()`)."""
        text = self.listing() if text is None else text
        return None if text is None else parse(text, self.gateway)

    def repair(self) -> None:
        """Forget what was programmed: the next apply reads the table back and repairs drift."""
        self._known = False

    def apply(self, identities: Mapping[str, frozenset[str]], policies: Mapping[str, PolicyIngress]) -> None:
        """Enforce the new state in one transaction, then cut the established flows it revokes."""
        new = PolicySet(dict(identities), dict(policies))
        known = self._known
        if known and new == self.state:
            return
        found = None if known else self.programmed()
        if found is not None:  # a restart: repair the difference from what the kernel holds
            self.state, self.numbers, self._known = found.state, dict(found.numbers), True
        old = self.state
        if self._known:
            numbers = numbered(new, self.numbers)
            script = render_delta(self.table, old, new, self.numbers, numbers)
            try:
                if script:
                    self._run(["nft", "-f", "-"], script)
                    self.transactions += 1
                self.numbers = numbers
            except PolicyError:  # the kernel drifted from what we programmed: replace the table
                self._replace(new)
        else:
            self._replace(new)
        self.state, self._known = new, True
        # after a read-back, flows admitted before (say, by an agent that stopped before it cut
        # them) are checked against every destination, not only the changed ones
        self._cut_revoked(old if known else PolicySet({}, {}), new)

    def _replace(self, state: PolicySet) -> None:
        numbers = numbered(state)
        self._run(["nft", "-f", "-"], render(self.table, self.gateway, state, numbers))
        self.numbers = numbers
        self.transactions += 1
        self.replaced += 1

    def admit(self, identity: str, ip: str) -> None:
        """Fail closed: before an instance of `identity` at `ip` starts, its address is under its
        identity's policy (and carries the identity's number) in the kernel. Open identities need
        nothing."""
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
        self.state, self.numbers, self._known = PolicySet({}, {}), {}, False

    def tuple_counters(self, text: str | None = None) -> dict[tuple[str, str, int, str], int]:
        """Packets admitted per allowed (destination, source, port, protocol), from the element
        counters of the t_/p_/s_ sets (the guarded chain is reached only by packets not of an
        established flow: new connections' first packets). A tuple whose sets carry no counters
        (a table made before they did) is left out; no table, no tuples. `text`: a listing."""
        text = self.listing() if text is None else text
        found = None if text is None else parse(text, self.gateway)
        if found is None:
            return {}
        blocks = {name: body for kind, name, body in _BLOCK.findall(text) if kind == "set"}
        out: dict[tuple[str, str, int, str], int] = {}
        for destination, ingress in found.state.policies.items():
            h = _h(destination)
            counted: dict[str, dict[str, int]] = {}
            for kind in _SET_TYPES:
                body = blocks.get(f"{kind}_{h}", "")
                if "\t\tcounter\n" not in body:
                    continue
                listed = body.partition("elements = {")[2]
                counted[kind] = {_plain(m["elem"]): int(m["packets"] or 0) for m in _ELEMENT.finditer(listed)}
            for t in ingress.allowed:
                elements = _elements([t], found.numbers)
                if all(kind in counted for kind, elems in elements.items() if elems):
                    out[(destination, *t)] = sum(counted[kind].get(e, 0) for kind, elems in elements.items()
                                                 for e in elems)
        return out

    def counters(self, text: str | None = None) -> dict[str, int]:
        """Dropped packets per guarded identity (its drop_<h> counter, named by its comment);
        `text`: a listing already read. No table: none."""
        text = self.listing() if text is None else text
        found = {}
        for kind, name, body in _BLOCK.findall(text or ""):
            comment, packets = re.search(r'comment "([^"]+)"', body), re.search(r"packets (\d+)", body)
            if kind == "counter" and name.startswith("drop_") and comment and packets:
                found[comment.group(1)] = int(packets.group(1))
        return found

    def _cut_revoked(self, old: PolicySet, new: PolicySet) -> None:
        """Only what a change takes away can end a flow: an allowed tuple revoked, an address that
        no longer carries an allowed source's identity, or a local address newly guarded. A grant
        takes nothing away, so it lists no conntrack entries. All the addresses a change cuts are
        judged from one listing (`_cut_flows`): a relabel of a source allowed by many local
        destinations is one `conntrack` process, not one per address (1.5 s at 100 of them under
        load, docs/benchmarks.md, "Network policy end to end")."""
        empty: frozenset[str] = frozenset()
        cuts: dict[str, str] = {}  # local address → its destination (an address has one identity)
        shrunk = {n for n, ips in old.identities.items()
                  if ips is not new.identities.get(n) and ips - new.identities.get(n, empty)}
        for destination, ingress in new.policies.items():
            before = old.policies.get(destination)
            if before is None or before.allowed - ingress.allowed or (
                    shrunk and any(s in shrunk for s, _, _ in ingress.allowed)):
                cut = ingress.local_ips
            else:
                cut = ingress.local_ips - before.local_ips
            cuts.update((ip, destination) for ip in cut)
        self._cut_flows(cuts, new)

    def _cut_flows(self, cuts: Mapping[str, str], state: PolicySet) -> None:
        """Delete the flows into the local addresses of `cuts` (address → its destination identity)
        that the new policy no longer allows. Matched by their reply source: that is the backend
        for a flow opened to a VIP and DNAT-ed to it as well as for a direct one (`-d ip` matches
        the original destination, the VIP, and missed the VIP's flows) — `conntrack -L -r ip` for
        one address, the whole listing filtered here for several (one process either way). The
        policy judges what the forward hook saw: the original source, the backend's port (the
        reply's source port)."""
        if not cuts:
            return
        argv = ["conntrack", "-L", "-r", next(iter(cuts))] if len(cuts) == 1 else ["conntrack", "-L"]
        for m in conntrack.listed(self._run, (PolicyError,), argv):
            if m["rsrc"] in cuts and m["src"] != self.gateway and not state.allows(
                    cuts[m["rsrc"]], m["src"], int(m["rsport"]), m["proto"]):
                conntrack.delete(self._run, (PolicyError,), m)
