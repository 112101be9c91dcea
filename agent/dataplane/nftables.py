"""The default data plane: service VIPs and external ports in nftables table `ip cca_svc_<bridge>`,
network policy delegated to `policy_nft.PolicyTables` (table `inet cca_pol_<bridge>`).

Layout — no chain per service (NETWORK-NOTES B2: libnftables re-reads every chain on every command,
so kube-proxy's chain-per-service layout makes one update cost 81 ms at 10,000 services). The
number of chains is fixed; services live only in map elements:

    map services  { ipv4_addr . inet_proto . inet_service : verdict }   VIP . tcp . 80 : goto pick_3
    map slots     { ipv4_addr . inet_proto . inet_service . mark : ipv4_addr . inet_service }
                                                            VIP . tcp . 80 . 2 : 10.88.1.7 . 8080
    map nodeports { inet_proto . inet_service : verdict }               tcp . 443 : goto xpick_2
    map ext_slots { inet_proto . inet_service . mark : ipv4_addr . inet_service }
    chain pick_N  ct mark set numgen random mod N; dnat to daddr . proto . dport . ct mark map @slots
    chain xpick_N the same for external ports (ct mark offset EXTERNAL, read back in postrouting)
    chain refuse  a frontend without a ready backend: tcp reset / icmp port unreachable at once

N = 1..EXACT gives every backend an equal share; a service with more backends uses WIDE slots
filled round robin (the first WIDE backends, shares differing by at most one slot in WIDE).
Hooks: prerouting (containers, other nodes) and output (node-originated, `-100`: `dstnat` is refused
there by nft 1.0.6) look up `services`, then the node addresses in `nodeports`. Postrouting
masquerades only a backend reaching itself through its VIP (hairpin: set of `b . b` for backends
in the bridge's subnets; bridge ports are in hairpin mode, see agent/net/node.py) and external
connections sent to another node (else the reply would leave that node by its own route); all other
traffic keeps its source address, which network policy on the destination node depends on.
The conntrack mark of a connection to a frontend is this plane's (slot number, external bit): other
tables must not rely on ct mark for such connections.

Every `apply` is one `nft -f -` transaction with only the difference from what is programmed (the
first apply reads the table back from the kernel, so a restarted agent repairs, never appends; a
table of another layout is replaced); the same state twice sends nothing. A changed service costs a
few element deletes and adds; a removed backend's conntrack entries are deleted after it — a UDP
backend's all, a TCP backend's unanswered ones only (connections it answered are left to finish).
Node-originated connects to a VIP need a route for the service range (`service_cidr`: `ip route
replace <cidr> dev <bridge>`), otherwise connect() fails before DNAT.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections import Counter

from ccattler.agent.dataplane import conntrack, libnft, policy_nft
from ccattler.agent.dataplane.base import (
    Backend,
    DataPlane,
    DataPlaneState,
    Frontend,
    PolicyIngress,
)
from ccattler.agent.dataplane.inspect import tuple_label
from ccattler.agent.dataplane.nft_changes import (
    InvalidServiceState,
    ServiceTableError,
    changed_frontends,
    check_ip,
)
from ccattler.agent.dataplane.nft_service_table import (
    EXTERNAL,
    Addr,
    ExtKey,
    Kernel,
    Ops,
    SvcKey,
    chain_for,
    counted,
    ext_elem,
    parse,
    skeleton,
    slot_map,
    svc_elem,
    table_name,
)

_RUN_ERRORS = (policy_nft.PolicyError, ServiceTableError, OSError)  # a tool that failed or is missing

Runner = policy_nft.Runner

class NftablesDataPlane(DataPlane):
    """One node's services, external ports and policy, in the current network namespace."""

    name = "nftables"

    def __init__(self, bridge: str, gateway: str | None = None, node_addresses: tuple[str, ...] = (),
                 run: Runner = policy_nft.run_command, service_cidr: str | None = None) -> None:
        self.bridge = bridge
        self.table = table_name(bridge)
        self.gateway = gateway
        self.node_addresses = tuple(sorted(set(node_addresses)))
        for ip in self.node_addresses:
            check_ip(ip, "node address")  # InvalidServiceState
        self.service_cidr = service_cidr
        # the default runner does nft in-process (libnftables); a given runner is used as it is.
        # Failures are PolicyError either way (PolicyTables repairs drift on it; _send rewraps).
        self._run = libnft.runner(run, policy_nft.PolicyError) if run is policy_nft.run_command else run
        self.policy = policy_nft.PolicyTables(bridge, gateway, run=self._run)
        self._kernel: Kernel | None = None   # None: read the table back before the next apply
        self._inputs: tuple[dict, dict] = ({}, {})  # the last applied services/external mappings
        self._refs: Counter[str] = Counter()   # backend ip → frontends using it (hairpin set)
        self._prepared = False
        self._gone: list[tuple[tuple, Addr]] = []  # removed backends: conntrack entries to delete
        self._networks: list[tuple[int, int]] | None = None  # the bridge's subnets; None: unknown
        self.transactions = 0   # transactions sent (idempotence and diff tests)
        self.replaced = 0       # of them, whole-table ones (no table, or another layout)
        self.last_script = ""

    # -- apply ----------------------------------------------------------------------------------
    def apply(self, state: DataPlaneState) -> None:
        if not self._prepared:
            self._prepare()
        self._apply_services(state)
        self.policy.apply(state.identities, state.policies)

    def admit(self, identity: str, ip: str) -> None:
        """Fail closed: `ip` is under `identity`'s policy before its instance starts."""
        self.policy.admit(identity, ip)

    def _prepare(self) -> None:
        """Once per process: same-node VIP replies are bridged and must pass conntrack (to be
        un-DNATed), and node-originated connects need a route for the service range."""
        try:
            try:
                self.policy.ensure_bridge_filtering()
            except policy_nft.PolicyError:  # the sysctl exists once the module is loaded
                self._run(["modprobe", "br_netfilter"], None)
                self.policy.ensure_bridge_filtering()
        except _RUN_ERRORS as exc:
            raise ServiceTableError("cannot enable bridge netfilter (same-node VIPs need module "
                                    f"br_netfilter, net.bridge.bridge-nf-call-iptables=1): {exc}") from exc
        if self.service_cidr:
            try:
                self._run(["ip", "route", "replace", self.service_cidr, "dev", self.bridge], None)
            except policy_nft.PolicyError as exc:
                raise ServiceTableError(f"route for the service range {self.service_cidr} via "
                                        f"{self.bridge}: {exc}") from None
        self._hairpin_ports()
        self._networks = self._bridge_networks()
        self._prepared = True

    def _bridge_networks(self) -> list[tuple[int, int]] | None:
        """The bridge's IPv4 subnets: only a backend in them can reach itself through this node, so
        only those addresses go into the hairpin set (None, unknown: every backend does)."""
        try:
            listed = self._run(["ip", "-j", "-4", "addr", "show", "dev", self.bridge], None)
            links = json.loads(listed or "[]")
        except (policy_nft.PolicyError, ServiceTableError, ValueError):
            return None
        nets = [ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False)
                for link in links for a in link.get("addr_info", []) if a.get("family") == "inet"]
        return [(int(n.network_address), int(n.netmask)) for n in nets] or None

    def _is_local(self, ip: str) -> bool:
        if self._networks is None:
            return True
        n = int.from_bytes(socket.inet_aton(ip), "big")
        return any(n & mask == net for net, mask in self._networks)

    def _hairpin_ports(self) -> None:
        """Hairpin mode on the bridge's ports: with bridge netfilter a backend's packet to its own
        VIP is DNATed while bridged and must go back out of the port it came in by (new ports get
        it from agent/net/node.py; this covers ports made before, e.g. by an older agent)."""
        try:
            ports = json.loads(self._run(["ip", "-j", "link", "show", "master", self.bridge], None) or "[]")
        except (policy_nft.PolicyError, ServiceTableError, ValueError):
            return  # no bridge yet: nothing to do
        for port in ports:
            name = port["ifname"]
            try:
                self._run(["ip", "link", "set", "dev", name, "type", "bridge_slave", "hairpin", "on"], None)
            except policy_nft.PolicyError:
                pass  # the port went away meanwhile

    def repair(self) -> None:
        """Forget what was programmed: the next apply reads both tables back and repairs drift."""
        self._kernel = None
        self._inputs = ({}, {})
        self.policy.repair()

    def _apply_services(self, state: DataPlaneState) -> None:
        try:
            self._sync(state)
        except InvalidServiceState:
            raise  # refused before anything was sent or recorded
        except BaseException:
            self.repair()  # the record may be wrong now: read the kernel back next time
            raise
        self._inputs = (state.services, state.external)

    def _sync(self, state: DataPlaneState) -> None:
        """Delta against the record (or the kernel read back); on a refused delta read the kernel
        again and retry once; a missing table, another layout or a second refusal: replace it.
        Only frontends whose input changed since the last apply are validated and normalised, and
        they are validated before anything is sent or recorded."""
        full = self._kernel is None
        changes = changed_frontends(state, ({}, {}) if full else self._inputs, full)
        if full:
            self._kernel = self._read_kernel()
        for attempt in range(2):
            if self._kernel is None:
                break
            if full:
                self._recount(self._kernel)
            self._gone = []
            script = self._delta(self._kernel, *changes, full=full)
            try:
                if script:
                    self._send(script)
                self._forget_gone()
                return
            except ServiceTableError:
                if attempt:
                    break
                self._kernel, full = self._read_kernel(), True
                changes = changed_frontends(state, ({}, {}), True)
        self._replace(*changed_frontends(state, ({}, {}), True))

    def _forget_gone(self) -> None:
        """A conntrack entry keeps its translation after its backend left. UDP has no end: a client
        socket keeps sending to a removed backend for as long as its entry lives (30-180 s), so all
        of them are deleted (what kube-proxy does too). A TCP connection the backend answered is
        left to finish; one it never answered (SYN_SENT: a lost node's backend) is deleted, else the
        client's next SYN retransmission, or a new connection that happens to reuse its source port
        within the entry's 120 s, is sent to the lost backend again instead of translated anew.
        Those are found in one listing of the unanswered TCP entries (few, and one process however
        many backends left)."""
        gone, self._gone = self._gone, []
        unanswered: dict[Addr, set[tuple[str | None, int]]] = {}  # backend → its frontends (None: any VIP)
        for key, (ip, port) in gone:
            vip, front_port = (key[0], key[2]) if len(key) == 3 else (None, key[1])
            if key[-2] == "tcp":
                unanswered.setdefault((ip, port), set()).add((vip, front_port))
                continue
            argv = ["conntrack", "-D", "-p", "udp", "--reply-src", ip, "--reply-port-src", str(port),
                    "--orig-port-dst", str(front_port)] + (["--orig-dst", vip] if vip else [])
            try:
                self._run(argv, None)
            except _RUN_ERRORS:
                pass  # no entry (conntrack exits 1 when nothing matched), or no conntrack tool
        if not unanswered:
            return
        syn_sent = ["conntrack", "-L", "-p", "tcp", "--state", "SYN_SENT"]
        for m in conntrack.listed(self._run, _RUN_ERRORS, syn_sent):
            fronts = unanswered.get((m["rsrc"], int(m["rsport"])), ())
            if {(m["dst"], int(m["dport"])), (None, int(m["dport"]))} & fronts:
                conntrack.delete(self._run, _RUN_ERRORS, m)

    def _recount(self, kernel: Kernel) -> None:
        self._refs = Counter()
        for slots in (*kernel.slots.values(), *kernel.ext_slots.values()):
            for ip in {a[0] for a in slots.values() if self._is_local(a[0])}:
                self._refs[ip] += 1

    def _delta(self, kernel: Kernel, services: dict[SvcKey, tuple[Addr, ...] | None],
               external: dict[ExtKey, tuple[Addr, ...] | None], full: bool) -> str:
        """The script turning `kernel` into the desired state; `kernel` (the record) is updated in
        place (a refused script makes the caller read it back). `services`/`external` hold the
        changed frontends (None: removed); `full` (after a read-back) holds all of them, and every
        frontend the kernel has beyond them is removed."""
        ops = Ops(self.table)
        touched: set[str] = set(kernel.hairpin) | set(self._refs) if full else set()
        svc = dict(services)
        ext = dict(external)
        if full:  # stale frontends, and slots orphaned by a crash or a hand edit
            for key in (set(kernel.services) | set(kernel.slots)) - set(svc):
                svc[key] = None
            for key in (set(kernel.nodeports) | set(kernel.ext_slots)) - set(ext):
                ext[key] = None
        for key in sorted(svc):
            self._one(ops, "services", "slots", "pick", kernel.services, kernel.slots, key, svc[key],
                      touched, svc_elem)
        for key in sorted(ext):
            self._one(ops, "nodeports", "ext_slots", "xpick", kernel.nodeports, kernel.ext_slots, key,
                      ext[key], touched, ext_elem)
        add = sorted(ip for ip in touched if self._refs[ip] > 0 and ip not in kernel.hairpin)
        drop = sorted(ip for ip in touched if self._refs[ip] <= 0 and ip in kernel.hairpin)
        for ip in [ip for ip in touched if self._refs[ip] <= 0]:
            del self._refs[ip]
        ops.delete("hairpin", [f"{ip} . {ip}" for ip in drop])
        ops.add("hairpin", [f"{ip} . {ip}" for ip in add])
        kernel.hairpin.difference_update(drop)
        kernel.hairpin.update(add)
        want_addrs = set(self.node_addresses)
        ops.delete("node_addrs", sorted(kernel.node_addrs - want_addrs))
        ops.add("node_addrs", sorted(want_addrs - kernel.node_addrs))
        kernel.node_addrs = want_addrs
        return ops.script()

    def _one(self, ops: Ops, vmap: str, slotmap: str, prefix: str, verdicts: dict, slots: dict,
             key: tuple, backends: tuple[Addr, ...] | None, touched: set[str], elem) -> None:
        """Diff one frontend: its verdict element and its slot elements (None: frontend removed)."""
        have_chain, have_slots = verdicts.get(key), slots.get(key, {})
        want_chain = None if backends is None else chain_for(len(backends), prefix)
        want_slots = {} if backends is None else slot_map(backends)
        offset = EXTERNAL if prefix == "xpick" else 0
        if have_chain != want_chain:
            if have_chain is not None:
                ops.delete(vmap, [elem(key)])
            if want_chain is not None:
                ops.add(vmap, [f"{elem(key)} : goto {want_chain}"])
        dels = [i for i, a in have_slots.items() if want_slots.get(i) != a]
        adds = [i for i, a in want_slots.items() if have_slots.get(i) != a]
        ops.delete(slotmap, [f"{elem(key)} . {i + offset}" for i in sorted(dels)])
        ops.add(slotmap, [f"{elem(key)} . {i + offset} : {want_slots[i][0]} . {want_slots[i][1]}"
                          for i in sorted(adds)])
        before = {a[0] for a in have_slots.values() if self._is_local(a[0])}
        after = {a[0] for a in want_slots.values() if self._is_local(a[0])}
        for ip in before - after:
            self._refs[ip] -= 1
        for ip in after - before:
            self._refs[ip] += 1
        touched |= before ^ after
        gone = set(have_slots.values()) - set(want_slots.values())  # key: (vip, proto, port) or (proto, port)
        self._gone += [(key, addr) for addr in sorted(gone)]
        if want_chain is None:
            verdicts.pop(key, None)
            slots.pop(key, None)
        else:
            verdicts[key] = want_chain
            slots[key] = want_slots

    def _replace(self, services: dict[SvcKey, tuple[Addr, ...] | None],
                 external: dict[ExtKey, tuple[Addr, ...] | None]) -> None:
        kernel = Kernel(node_addrs=set(self.node_addresses))
        ops = Ops(self.table)
        self._refs = Counter()
        touched: set[str] = set()
        for key in sorted(services):
            self._one(ops, "services", "slots", "pick", kernel.services, kernel.slots, key,
                      services[key], touched, svc_elem)
        for key in sorted(external):
            self._one(ops, "nodeports", "ext_slots", "xpick", kernel.nodeports, kernel.ext_slots, key,
                      external[key], touched, ext_elem)
        kernel.hairpin = {ip for ip, n in self._refs.items() if n > 0}
        ops.add("hairpin", [f"{ip} . {ip}" for ip in sorted(kernel.hairpin)])
        ops.add("node_addrs", list(self.node_addresses))
        self._send(self.skeleton() + ops.script())
        self.replaced += 1
        self._kernel = kernel

    def skeleton(self) -> str:
        """The table without elements: delete whatever is there, then declare the fixed layout."""
        return skeleton(self.table, self.bridge, self.node_addresses)

    def _send(self, script: str) -> None:
        self.last_script = script
        try:
            self._run(["nft", "-f", "-"], script)
        except policy_nft.PolicyError as exc:
            raise ServiceTableError(str(exc)) from None
        self.transactions += 1

    # -- read back ------------------------------------------------------------------------------
    def _listing(self, kind: str, name: str) -> str | None:
        try:
            return self._run(["nft", "list", kind, "ip", self.table, *([name] if name else [])], None)
        except (policy_nft.PolicyError, ServiceTableError):
            return None  # no such table or object

    def _read_kernel(self) -> Kernel | None:
        """The table's elements, or None when it is missing or of another layout (replace it).
        One text listing, parsed by pattern: each `nft list` fills libnftables' cache with the
        whole table anyway (~1 s at 30,000 services), and JSON is slower to produce and to load."""
        text = self._listing("table", "")
        if text is None:
            return None
        return parse(text, self.node_addresses)

    def programmed(self) -> DataPlaneState:
        """What the kernel holds now: services and external ports (backends as address and port,
        sorted), identities and policies from the policy table."""
        return self._state(self._listing("table", ""), self.policy.listing())

    def counters(self) -> dict[str, dict | int]:
        """New connections per VIP and per external port (element counters: the nat hooks see only
        a connection's first packet), packets refused for want of a ready backend, and, from the
        policy table, packets dropped per guarded identity and admitted per allowed tuple."""
        return self._counts(self._listing("table", ""), self.policy.listing())

    def connection_counters(self) -> dict[str, int]:
        """New connections per VIP (`vip:port/proto`) only: a listing of the services map, not the
        whole table (the autoscaler's samples, agent/service_metrics.py, read it every 10 s)."""
        text = self._listing("map", "services")
        return counted(text)["services"] if text is not None else {}

    def inspect(self) -> tuple[DataPlaneState, dict[str, dict | int]]:
        """`programmed()` and `counters()` from one listing of each table (`cca node-inspect
        --dataplane`): every `nft list` makes libnftables read the whole ruleset again."""
        text, policy = self._listing("table", ""), self.policy.listing()
        return self._state(text, policy), self._counts(text, policy)

    def _state(self, text: str | None, policy: str | None) -> DataPlaneState:
        kernel = (parse(text, self.node_addresses) if text is not None else None) or Kernel()

        def backends(chain: str, slots: dict[int, Addr]) -> tuple[Backend, ...]:
            count = 0 if chain == "refuse" else int(chain.rsplit("_", 1)[1])
            seen = [slots[i] for i in range(count) if i in slots]
            return tuple(Backend(ip, port) for ip, port in sorted(set(seen)))

        services = {Frontend(ip, port, proto): backends(c, kernel.slots.get((ip, proto, port), {}))
                    for (ip, proto, port), c in kernel.services.items()}
        external = {Frontend("", port, proto): backends(c, kernel.ext_slots.get((proto, port), {}))
                    for (proto, port), c in kernel.nodeports.items()}
        identities, policies = self._read_policy(policy)
        return DataPlaneState(services=services, external=external, identities=identities, policies=policies)

    def _read_policy(self, text: str | None) -> tuple[dict[str, frozenset[str]], dict[str, PolicyIngress]]:
        """The policy table as the kernel holds it, through the policy module's own reader (one
        parser of its layout). Identities without addresses are left out (the table numbers every
        identity a rule names); a missing table or one of another layout reads as no policy."""
        found = self.policy.programmed(text) if text is not None else None
        if found is None:
            return {}, {}
        identities = {n: a for n, a in found.state.identities.items() if a}
        return identities, dict(found.state.policies)

    def _counts(self, text: str | None, policy: str | None) -> dict[str, dict | int]:
        out: dict[str, dict | int] = {"services": {}, "external": {}, "refused": 0, "dropped": {},
                                      "policy": {}}
        if text is not None:
            out.update(counted(text))
        if policy is not None:
            out["dropped"] = self.policy.counters(policy)
            out["policy"] = {tuple_label(src, dst, port, proto): n for (dst, src, port, proto), n
                             in self.policy.tuple_counters(policy).items()}
        return out

    def teardown(self) -> None:
        self._run(["nft", "-f", "-"], f"table ip {self.table}\ndelete table ip {self.table}\n")
        if self.service_cidr and self._prepared:
            try:
                self._run(["ip", "route", "del", self.service_cidr, "dev", self.bridge], None)
            except (policy_nft.PolicyError, ServiceTableError):
                pass  # already gone (with the bridge)
        self._prepared = False
        self.policy.teardown()
        self._kernel = None
        self._inputs = ({}, {})
        self._refs = Counter()
