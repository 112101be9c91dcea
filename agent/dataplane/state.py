"""A node's slice of facts → the `DataPlaneState` its data plane enforces (agent/dataplane/base.py).

Read from the slice (engine/api/slice.py shares these with every node):

    derived/vip/<tenant>/<service>       {"ip", "ports": [{"port", "protocol", "external"}]}
    derived/endpoint/<tenant>/<service>  {"endpoints": [{"instance", "node", "ip"}]}  (ready ones)
    derived/firewall/<node>              this node's policy document (policy_state.py)
    derived/identity/<tenant>/<service>  {"identity", "addresses"}: of each identity it mentions

Every exposed port of a VIP is a frontend balanced over the service's ready endpoints (the backend
listens on the exposed port itself); endpoints without an address (process runtime) are skipped, and
a VIP without any ready endpoint is kept with no backends, so the plane refuses at once. `expose N
external` ports are also node ports (`Frontend("", N)`). `http` exposes are TCP at this layer.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Mapping
from typing import Any

from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend
from ccattler.agent.dataplane.policy_state import addresses_of, mentioned, policies_of
from ccattler.engine.facts.keys import ENDPOINTS, FIREWALL, IDENTITIES, VIPS


def _protocol(raw: Any) -> str:
    return "udp" if raw == "udp" else "tcp"


def _address(raw: Any) -> str | None:
    return _checked(raw) if isinstance(raw, str) else None


@functools.lru_cache(maxsize=1 << 16)
def _checked(raw: str) -> str | None:
    """The address in normal form, or None. Cached: parsing was 60 % of a state build."""
    try:
        return str(ipaddress.IPv4Address(raw))
    except ValueError:
        return None


def _backends(doc: Any, port: int) -> tuple[Backend, ...]:
    if not isinstance(doc, Mapping):
        return ()
    found = set()
    for entry in doc.get("endpoints") or []:
        if isinstance(entry, Mapping) and (ip := _address(entry.get("ip"))):
            found.add(Backend(ip, port, str(entry.get("node") or ""), str(entry.get("instance") or "")))
    return tuple(sorted(found))


def keys_under(facts: Mapping[str, Any], prefix: str) -> list[str]:
    """The slice's keys under `prefix`, sorted — those still held as JSON text too (agent
    `SliceFacts.raw`: shared documents are decoded only when read, and iteration skips them)."""
    raw = getattr(facts, "raw", {})
    return sorted({k for k in facts if k.startswith(prefix)} | {k for k in raw if k.startswith(prefix)})


def service_range(facts: Mapping[str, Any]) -> str | None:
    """The service CIDR the VIPs come from (every VIP document carries it), or None without VIPs."""
    for key in keys_under(facts, VIPS):
        doc = facts.get(key)
        if isinstance(doc, Mapping) and isinstance(doc.get("range"), str):
            return doc["range"]
    return None


def dataplane_state(facts: Mapping[str, Any], node: str) -> DataPlaneState:
    """What `node`'s kernel should enforce, from its slice `facts` (key → document). Malformed
    documents contribute nothing rather than failing the whole node."""
    return StateBuilder().build(facts, node)


#: One service's part of the state: (frontend, its backends, also an external port?) per port.
Rows = tuple[tuple[Frontend, tuple[Backend, ...], bool], ...]


class StateBuilder:
    """`dataplane_state` for a caller that builds it again and again (the agent, on every endpoint
    change). A service whose VIP and endpoint documents equal the ones of the last build keeps its
    rows — the same Frontend/Backend objects, so the plane's side-by-side walk and the agent's
    "changed?" check compare them by identity. When `facts` is the agent's `SliceFacts` (it
    records which keys changed: `take_touched`), only the services under those keys are looked at
    again; otherwise every service is. At 10,000 services a build from scratch took 250 ms and a
    whole pass with every row kept still tens of ms (docs/benchmarks.md, "Watch-to-kernel").
    Documents are read, never changed in place. VIPs are unique (the VIP controller's job); two
    services with one VIP would leave whichever was written last. A build that changed nothing
    returns the previous state object itself, so "changed?" is `is not` (comparing 30,000
    frontends by value cost ~20 ms); `range` is the service CIDR the VIP documents carry."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[Any, Any, Rows]] = {}  # VIP key → (documents, rows)
        self._facts: Any = None
        self._services: dict[Frontend, tuple[Backend, ...]] = {}
        self._firewall: Any = self  # the firewall document last read (the builder: none yet)
        self._policies: dict[str, Any] = {}
        self._names: set[str] = set()  # the identities the policies mention
        self._identities: dict[str, frozenset[str]] = {}
        self._external_keys: set[str] = set()  # VIP keys with an external port among their rows
        self._state: DataPlaneState | None = None
        self.range: str | None = None

    def build(self, facts: Mapping[str, Any], node: str) -> DataPlaneState:
        touched = facts.take_touched() if hasattr(facts, "take_touched") else None
        if touched is None or facts is not self._facts or self._state is None:
            self._full(facts)
            touched, changed = None, True
        else:
            changed = self._some(facts, touched)
        self._facts = facts
        changed = self._policy(facts, node, touched) or changed
        if not changed and self._state is not None:
            return self._state
        external: dict[Frontend, tuple[Backend, ...]] = {}
        for key in sorted(self._external_keys):
            for frontend, backends, is_external in self._memo[key][2]:
                if is_external:
                    # admission refuses two services on one external port; the first name wins otherwise
                    external.setdefault(Frontend("", frontend.port, frontend.protocol), backends)
        self._state = DataPlaneState(services=dict(self._services), external=external,
                                     identities=self._identities, policies=self._policies)
        return self._state

    def _policy(self, facts: Mapping[str, Any], node: str, touched: set[str] | None) -> bool:
        """Read the node's firewall document again when it changed, and the identity documents
        it mentions that changed (all of them when `touched` is None); True when either did. An
        identity whose addresses stay keeps its set object (the planes compare them by identity)."""
        firewall = facts.get(FIREWALL + node)
        rules = firewall is not self._firewall
        if rules:
            self._firewall, self._policies = firewall, policies_of(firewall)
            names = mentioned(self._policies)
            stale, self._names = names - self._names if touched is not None else names, names
        else:
            stale = set()
        if touched is None:
            stale = set(self._names)
        else:
            stale |= {k[len(IDENTITIES):] for k in touched if k.startswith(IDENTITIES)} & self._names
        if not rules and not stale:
            return False
        identities = {n: ips for n, ips in self._identities.items() if n in self._names}
        for name in stale:
            ips = addresses_of(facts.get(IDENTITIES + name))
            if not ips:
                identities.pop(name, None)
            elif ips != identities.get(name):
                identities[name] = ips
        if identities == self._identities:
            return rules
        self._identities = identities
        return True

    def _full(self, facts: Mapping[str, Any]) -> None:
        memo: dict[str, tuple[Any, Any, Rows]] = {}
        services: dict[Frontend, tuple[Backend, ...]] = {}
        self._external_keys, self.range = set(), None
        for key in keys_under(facts, VIPS):
            memo[key] = self._rows_of(facts, key)
            self._note(key, memo[key])
            for frontend, backends, _ in memo[key][2]:
                services[frontend] = backends
        self._memo, self._services = memo, services

    def _some(self, facts: Mapping[str, Any], touched: set[str]) -> bool:
        """Rebuild the services under `touched`; True when any of them is one."""
        keys = {VIPS + k[len(ENDPOINTS):] if k.startswith(ENDPOINTS) else k
                for k in touched if k.startswith((VIPS, ENDPOINTS))}
        for key in sorted(keys):
            old = self._memo.pop(key, (None, None, ()))
            self._external_keys.discard(key)
            new = self._rows_of(facts, key, old) if facts.get(key) is not None else None
            kept = {r[0] for r in new[2]} if new else set()
            for frontend, _, _ in old[2]:
                if frontend not in kept:
                    self._services.pop(frontend, None)
            if new is not None:  # a frontend that stays keeps its place (the plane's walk wants it)
                self._memo[key] = new
                self._note(key, new)
                for frontend, backends, _ in new[2]:
                    self._services[frontend] = backends
        return bool(keys)

    def _note(self, key: str, entry: tuple[Any, Any, Rows]) -> None:
        if any(row[2] for row in entry[2]):
            self._external_keys.add(key)
        vip = entry[0]
        if isinstance(vip, Mapping) and isinstance(vip.get("range"), str):
            self.range = vip["range"]

    def _rows_of(self, facts: Mapping[str, Any], key: str, last: Any = None) -> tuple[Any, Any, Rows]:
        vip, endpoints = facts.get(key), facts.get(ENDPOINTS + key[len(VIPS):])
        last = last if last is not None else self._memo.get(key)
        if last is not None and (last[0] is vip or last[0] == vip) and (
                last[1] is endpoints or last[1] == endpoints):
            return last
        return vip, endpoints, _rows(vip, endpoints)


def _rows(vip: Any, endpoints: Any) -> Rows:
    if not isinstance(vip, Mapping):
        return ()
    ip = _address(vip.get("ip"))
    if ip is None:
        return ()
    rows = []
    for entry in vip.get("ports") or []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("port"), int):
            continue
        port, protocol = entry["port"], _protocol(entry.get("protocol"))
        rows.append((Frontend(ip, port, protocol), _backends(endpoints, port), bool(entry.get("external"))))
    return tuple(rows)
