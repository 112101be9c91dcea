"""The eBPF data plane (`--dataplane ebpf`): socket load balancing for service VIPs and identity
policy into local instances, as BPF map contents (bpf/ccattler.bpf.c, loaded per node by
bpf/loader.py). `apply` diffs the desired state against the maps as read back from the kernel, so a
restarted agent repairs rather than appends, and never disturbs connections: translation happens
once at connect time, and a service's slots are written before its count is raised and trimmed
after it is lowered (a connecting socket never picks an empty slot).

Not in BPF: external node ports and node-originated traffic to VIPs (socket LB sees only sockets of
the node's containers, and incoming external packets need packet NAT): both go to `fallback`, the
nftables plane, when one is given.

Identities get small numbers local to this node (1 is the node itself: its gateway and underlay
addresses, always admitted, so probes and the node-local DNS keep working); the number ↔ name table
is kept in a file beside the node's state, since the maps hold only numbers.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ccattler.agent.dataplane.base import Backend, DataPlane, DataPlaneState, Frontend, PolicyIngress
from ccattler.agent.dataplane.inspect import service_label, tuple_label
from ccattler.agent.dataplane.nft_changes import InvalidServiceState, check_ip, service_changes, validated
from ccattler.bpf import maps
from ccattler.bpf.loader import NodePrograms
from ccattler.bpf.syscall import Map

HOST = "host"


def _same(last: tuple | None, state: DataPlaneState) -> bool:
    """`state`'s identities and policies are the very objects of `last` (compared by identity: the
    agent's StateBuilder keeps them while the node's firewall document stays the same)."""
    return last is not None and last[0] is state.identities and last[1] is state.policies


class EbpfDataPlane(DataPlane):
    name = "ebpf"

    def __init__(self, node: str, cgroup: str, state_dir: Path | str, host_addresses: tuple[str, ...] = (),
                 fallback: DataPlane | None = None, programs: NodePrograms | None = None) -> None:
        self.programs = programs or NodePrograms(node, cgroup)
        self.programs.setup()
        self.maps = {name: Map(self.programs.map_path(name))
                     for name in ("cca_services", "cca_backends", "cca_ipcache", "cca_policy", "cca_policed")}
        self.ids_file = Path(state_dir) / "dataplane" / "ebpf-identities.json"
        self.ids: dict[str, int] = self._load_ids()
        self.host_addresses = tuple(host_addresses)
        self.fallback = fallback
        self.writes = 0  # map elements written or deleted (diff and idempotence tests)
        self._checked: dict[Frontend, tuple[Backend, ...]] = {}  # the services last found valid
        self._policy_checked: tuple | None = None  # the identities and policies last found valid
        self._inputs: dict[Frontend, tuple[Backend, ...]] | None = None  # last applied services
        self._policy_inputs: tuple | None = None  # the identities and policies last applied
        self._next_sid = 1
        self.repair()  # the first apply reads the maps back: a restart repairs, never appends

    # -- identities -----------------------------------------------------------------------------
    def _load_ids(self) -> dict[str, int]:
        try:
            ids = json.loads(self.ids_file.read_text())
        except (OSError, ValueError):
            ids = {}
        ids[HOST] = maps.HOST_IDENTITY
        return ids

    def _identity(self, name: str) -> int:
        if name not in self.ids:
            used = set(self.ids.values())
            self.ids[name] = next(i for i in range(2, 2**31) if i not in used)
        return self.ids[name]

    def _save_ids(self, keep: set[str]) -> None:
        self.ids = {n: i for n, i in self.ids.items() if n in keep or n == HOST}
        self.ids_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.ids_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.ids, sort_keys=True))
        tmp.replace(self.ids_file)

    # -- apply ----------------------------------------------------------------------------------
    def apply(self, state: DataPlaneState) -> None:
        """Bad input is refused (InvalidServiceState) before anything changes. A write the kernel
        refuses half way makes this plane forget its record (`repair`): the next apply reads the
        maps back and writes what they lack, instead of trusting a record of what never landed.
        Between those, only the services whose input changed since the last apply are looked at
        (the agent's StateBuilder keeps unchanged rows: compared by identity, 10,000 services in
        about a millisecond)."""
        changes = self._check(state)
        try:
            self._apply_services(state.services, changes)
            self._apply_policy(state)
        except BaseException:
            self.repair()
            raise
        self._inputs = state.services
        if self.fallback is not None:
            self.fallback.apply(DataPlaneState(services=state.services, external=state.external))

    def _put(self, m: Map, pairs: list[tuple[bytes, bytes]]) -> None:
        m.update_many(pairs)
        self.writes += len(pairs)

    def _drop(self, m: Map, keys: list[bytes]) -> None:
        m.delete_many(keys)
        self.writes += len(keys)

    def _check(self, state: DataPlaneState) -> tuple[list, list] | None:
        """Everything the maps cannot hold, refused before the first write (the record included).
        Returns the changed services against the last applied input ((frontend, backends) new or
        changed, frontends removed), or None when there is no such input (first apply, or after
        `repair`): then every frontend is diffed against the maps, and a frontend whose backends
        are the very tuple checked last time is not checked again."""
        if self._inputs is None or self._services is None:
            changes = None
            last = self._checked
            for front, backends in state.services.items():
                if last.get(front) is not backends:
                    validated("service", front, backends)
        else:
            changes = service_changes(state.services, self._inputs)
            for front, backends in changes[0]:
                validated("service", front, backends)
        if not _same(self._policy_checked, state):
            self._check_policy(state)
        self._checked = state.services
        return changes

    def _check_policy(self, state: DataPlaneState) -> None:
        for name, ips in state.identities.items():
            for ip in ips:
                check_ip(ip, f"identity {name}: address")
        for name, policy in state.policies.items():
            for ip in policy.local_ips:
                check_ip(ip, f"policy of {name}: local address")
            for src, port, proto in policy.allowed:
                if proto not in maps.PROTO_NUMBERS or not isinstance(port, int) or not 0 <= port < 65536:
                    raise InvalidServiceState(f"policy of {name}: ({src}, {port}, {proto}) is not a port "
                                              f"0-65535 and one of {', '.join(maps.PROTO_NUMBERS)}")
        self._policy_checked = (state.identities, state.policies)

    def admit(self, identity: str, ip: str) -> None:
        """Fail closed: `ip` maps to `identity` in the ipcache before its instance starts, so the
        ingress program already polices it (only for identities this node polices)."""
        if self._policy is None or identity not in self.ids:
            return
        _, have_ip, have_policed = self._policy
        number = self.ids[identity]
        if number in have_policed and have_ip.get(ip) != number:
            self._put(self.maps["cca_ipcache"], [(maps.ip_key(ip), maps.ipcache_val(number))])
            have_ip[ip] = number
            self._policy_inputs = None  # the next apply compares the ipcache with its state again

    def repair(self) -> None:
        """Forget what this plane believes it programmed: the next `apply` reads the maps back and
        repairs any drift (a restarted agent starts this way)."""
        self._services = self._policy = None
        self._inputs = self._policy_inputs = None

    def _read_services(self) -> tuple[dict[tuple[str, int, str], list[int]], dict[int, dict[int, tuple]]]:
        """From the kernel: frontend → [id, count, hits], and id → slot → (address, port)."""
        current = {maps.parse_svc_key(k): list(maps.parse_svc_val(v))
                   for k, v in self.maps["cca_services"].read_all().items()}
        slots: dict[int, dict[int, tuple[str, int]]] = {}
        for k, v in self.maps["cca_backends"].read_all().items():
            sid, slot = maps.parse_backend_key(k)
            slots.setdefault(sid, {})[slot] = maps.parse_backend_val(v)
        return current, slots

    def _apply_services(self, desired: dict[Frontend, tuple[Backend, ...]],
                        changes: tuple[list, list] | None) -> None:
        """Diff against what was programmed (read from the kernel once, then kept), and write in
        three batches — every slot, then every count, then trims and deletes — so a connecting
        socket never picks a slot that is not there. With `changes` (the services whose input
        changed since the last apply) only those are diffed; without, every desired frontend is,
        and whatever the maps hold beyond them is removed."""
        full = changes is None or self._services is None
        if self._services is None:
            self._services = self._read_services()
            current, slots = self._services
            self._next_sid = max((*(v[0] for v in current.values()), *slots), default=0) + 1
        current, slots = self._services
        if full:
            todo: list = list(desired.items())
            wanted = {(f.ip, f.port, f.protocol) for f in desired}
            gone = [k for k in current if k not in wanted]
        else:
            todo = changes[0]
            gone = [(f.ip, f.port, f.protocol) for f in changes[1]]
        slot_writes, count_writes, trims, live = [], [], [], set()
        for front, backends in todo:
            key = (front.ip, front.port, front.protocol)
            want = sorted({(b.ip, b.port) for b in backends})
            if key not in current:
                current[key] = [self._next_sid, -1, 0]
                self._next_sid += 1
            sid, count, _ = current[key]
            have = slots.setdefault(sid, {})
            live.add(sid)
            for i, b in enumerate(want):
                if have.get(i) != b:
                    slot_writes.append((maps.backend_key(sid, i), maps.backend_val(*b)))
                    have[i] = b
            if count != len(want):
                raw = self.maps["cca_services"].lookup(maps.svc_key(*key))  # its live hit counter
                hits = maps.parse_svc_val(raw)[2] if raw else 0
                count_writes.append((maps.svc_key(*key), maps.svc_val(sid, len(want), hits)))
                current[key][1] = len(want)
            for i in [i for i in have if i >= len(want)]:
                trims.append(maps.backend_key(sid, i))
                del have[i]
        svc, be = self.maps["cca_services"], self.maps["cca_backends"]
        self._put(be, slot_writes)
        self._put(svc, count_writes)
        self._drop(be, trims)
        dead = []
        for key in gone:
            if key in current:
                self._drop(svc, [maps.svc_key(*key)])  # the frontend first, then (below) its slots
                dead.append(current.pop(key)[0])
        if full:  # slots of removed services, or orphaned by a crash
            dead = list(set(slots) - live)
        for sid in dead:
            if sid not in live:
                self._drop(be, [maps.backend_key(sid, i) for i in slots.pop(sid, {})])

    def _apply_policy(self, state: DataPlaneState) -> None:
        if self._policy is not None and _same(self._policy_inputs, state):
            return  # the same identity and policy objects as last applied: nothing to diff
        names = set(state.identities) | set(state.policies)
        names |= {src for p in state.policies.values() for src, _, _ in p.allowed}
        want_ip = {ip: maps.HOST_IDENTITY for ip in self.host_addresses}
        for name, ips in sorted(state.identities.items()):
            for ip in ips:
                want_ip.setdefault(ip, self._identity(name))
        want_policy = {(self._identity(dst), self._identity(src), port, proto)
                       for dst, p in state.policies.items() for src, port, proto in p.allowed}
        want_policed = {self._identity(dst) for dst in state.policies}
        self._save_ids(names)
        ipc, pol, policed = self.maps["cca_ipcache"], self.maps["cca_policy"], self.maps["cca_policed"]
        if self._policy is None:
            addresses = {maps.parse_ip_key(k): maps.parse_ipcache_val(v) for k, v in ipc.read_all().items()}
            self._policy = ({maps.parse_policy_key(k) for k in pol.walk()}, addresses,
                            {maps.parse_identity_key(k) for k in policed.walk()})
        have_policy, have_ip, have_policed = self._policy
        # Grants before policing and address moves, revocations after: nothing is cut in between.
        self._put(pol, [(maps.policy_key(*t), maps.counter()) for t in sorted(want_policy - have_policy)])
        self._put(ipc, [(maps.ip_key(ip), maps.ipcache_val(i)) for ip, i in sorted(want_ip.items())
                         if have_ip.get(ip) != i])
        self._put(policed, [(maps.identity_key(i), maps.counter())
                             for i in sorted(want_policed - have_policed)])
        self._drop(policed, [maps.identity_key(i) for i in have_policed - want_policed])
        self._drop(pol, [maps.policy_key(*t) for t in have_policy - want_policy])
        self._drop(ipc, [maps.ip_key(ip) for ip in set(have_ip) - set(want_ip)])
        self._policy = (want_policy, want_ip, want_policed)
        self._policy_inputs = (state.identities, state.policies)

    # -- read back ------------------------------------------------------------------------------
    def programmed(self) -> DataPlaneState:
        """What the maps hold now (read from the kernel, not from this plane's own record); nothing
        after `teardown`."""
        if not self.maps:
            external = self.fallback.programmed().external if self.fallback is not None else {}
            return DataPlaneState(external=external)
        current, slots = self._read_services()
        services = {}
        for (vip, port, proto), (sid, count, _) in current.items():
            got = slots.get(sid, {})
            services[Frontend(vip, port, proto)] = tuple(Backend(*got[i]) for i in range(count) if i in got)
        names = {i: n for n, i in self.ids.items()}
        identities: dict[str, set[str]] = {}
        for k, v in self.maps["cca_ipcache"].read_all().items():
            name = names.get(maps.parse_ipcache_val(v), f"#{maps.parse_ipcache_val(v)}")
            if name != HOST:
                identities.setdefault(name, set()).add(maps.parse_ip_key(k))
        allowed: dict[str, set[tuple[str, int, str]]] = {}
        for k in self.maps["cca_policy"].walk():
            dst, src, port, proto = maps.parse_policy_key(k)
            allowed.setdefault(names.get(dst, f"#{dst}"), set()).add((names.get(src, f"#{src}"), port, proto))
        policies = {}
        for k in self.maps["cca_policed"].walk():
            name = names.get(maps.parse_identity_key(k), f"#{maps.parse_identity_key(k)}")
            policies[name] = PolicyIngress(name, frozenset(identities.get(name, ())),
                                           frozenset(allowed.get(name, ())))
        external = self.fallback.programmed().external if self.fallback is not None else {}
        return DataPlaneState(services=services, external=external,
                              identities={n: frozenset(a) for n, a in identities.items()}, policies=policies)

    def connection_counters(self) -> dict[str, int]:
        """Connect-time translations per VIP (`vip:port/proto`), the autoscaler's samples."""
        return {service_label(Frontend(*maps.parse_svc_key(k))): maps.parse_svc_val(v)[2]
                for k, v in self.maps["cca_services"].read_all().items()}

    def counters(self) -> dict[str, dict]:
        """Hit counters for `cca node-inspect --dataplane` (agent/dataplane/inspect.py): socket LB
        translations per VIP, packets admitted per policy tuple, drops per default-deny identity,
        and the nftables fallback's new connections per external port."""
        names = {i: n for n, i in self.ids.items()}
        out: dict[str, dict] = {"services": {}, "policy": {}, "dropped": {}, "external": {}}
        out["services"] = self.connection_counters()
        for k, v in self.maps["cca_policy"].read_all().items():
            dst, src, port, proto = maps.parse_policy_key(k)
            label = tuple_label(names.get(src, f"#{src}"), names.get(dst, f"#{dst}"), port, proto)
            out["policy"][label] = maps.parse_counter(v)
        for k, v in self.maps["cca_policed"].read_all().items():
            number = maps.parse_identity_key(k)
            out["dropped"][names.get(number, f"#{number}")] = maps.parse_counter(v)
        fallback = getattr(self.fallback, "counters", None)  # external ports: the nftables beside
        if callable(fallback):
            out["external"] = fallback().get("external", {})
        return out

    def teardown(self) -> None:
        for m in self.maps.values():
            m.close()
        self.maps = {}
        self.programs.teardown()
        self.ids_file.unlink(missing_ok=True)
        if self.fallback is not None:
            self.fallback.teardown()


def normalised(state: DataPlaneState) -> DataPlaneState:
    """`state` as the eBPF plane can read it back (backends as address and port only, sorted), for
    comparing a desired state with `programmed()`."""
    return replace(state, services={f: tuple(sorted({Backend(b.ip, b.port) for b in bs}))
                                    for f, bs in state.services.items()})
