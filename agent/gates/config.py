"""HAProxy's configuration for a node's gates: one frontend per listen port on the node address,
host and path ACLs choosing a backend per gate, and per backend its server slots (free slots
`disabled`, so the runtime API can fill them without a reload).

Sticky cookies are HAProxy's dynamic cookies (`cookie … dynamic`): a server's cookie value is a
hash of its address, port and the backend's `dynamic-cookie-key`, recomputed by `set server … addr`.
The key is derived from the gate's name, so every node gives one backend instance the same value
whatever slot it sits in there — a cookie from one node's gate picks the same instance on all of
them. (2.6 refuses `cookie` on `add server`, and has no command to set a slot's cookie.)"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from ccattler.agent.gates.model import Gate
from ccattler.agent.gates.slots import Slots, server_name

#: The address a free slot holds until the runtime API gives it an endpoint's.
FREE_ADDRESS = "127.0.0.1"
#: What answers a request no gate's host and path match.
NO_ROUTE = "gates_no_route"
TIMEOUTS = {"connect": "5s", "client": "60s", "server": "60s", "http-keep-alive": "60s",
            "http-request": "10s"}


def cookie_key(gate: Gate) -> str:
    """The backend's `dynamic-cookie-key`: the same on every node (it names the gate, nothing of
    the node). Not a secret — it keeps values stable, it does not hide backend addresses."""
    return hashlib.sha256(f"ccattler-gate:{gate.name}".encode()).hexdigest()[:32]


def render(gates: list[Gate], slots: Mapping[str, Slots], address: str, socket: Path) -> str:
    """The whole configuration file. `slots` holds every gate's backend (`Gate.backend`)."""
    lines = ["# Written by the CCattler agent (agent/gates/); it is rewritten on every change.",
             "global",
             "    master-worker",
             f"    stats socket {socket} mode 600 level admin expose-fd listeners",
             "    stats timeout 10s",
             "defaults",
             "    mode http",
             "    option http-keep-alive",
             *(f"    timeout {name} {value}" for name, value in TIMEOUTS.items())]
    by_port: dict[int, list[Gate]] = defaultdict(list)
    for gate in gates:
        by_port[gate.listen].append(gate)
    for port, members in sorted(by_port.items()):
        lines += ["", f"frontend gates_{port}", f"    bind {address}:{port}"]
        for gate in _most_specific_first(members):
            lines += _rules(gate)
        lines.append(f"    default_backend {NO_ROUTE}")
    for gate in gates:
        lines += ["", *_backend(gate, slots[gate.backend])]
    lines += ["", f"backend {NO_ROUTE}",
              "    http-request return status 404 content-type text/plain"
              ' string "no gate routes this host and path"']
    return "\n".join(lines) + "\n"


def _most_specific_first(gates: list[Gate]) -> list[Gate]:
    """Longer paths first, then gates that name hosts before those that take any host."""
    return sorted(gates, key=lambda g: (-len(g.path or ""), not g.hosts, g.name))


def _rules(gate: Gate) -> list[str]:
    b = gate.backend
    lines, conditions = [], []
    if gate.hosts:  # the Host header without its port, compared case-insensitively
        lines.append(f"    acl host_{b} req.hdr(host),field(1,:),lower -m str {' '.join(gate.hosts)}")
        conditions.append(f"host_{b}")
    if gate.path:  # the prefix as a whole segment: /api matches /api and /api/x, not /apix
        lines += [f"    acl path_{b} path {gate.path}", f"    acl path_{b} path_beg {gate.path}/"]
        conditions.append(f"path_{b}")
    lines.append(f"    use_backend {b}" + (f" if {' '.join(conditions)}" if conditions else ""))
    return lines


def _backend(gate: Gate, slots: Slots) -> list[str]:
    lines = [f"backend {gate.backend}",
             "    balance source" if gate.affinity == "source_ip" else "    balance roundrobin"]
    if gate.sticky:
        s = gate.sticky
        options = " secure" * s.secure + " httponly" * s.http_only
        lines += [f'    cookie {s.cookie} insert indirect nocache dynamic{options} '
                  f'attr "SameSite={s.same_site.title()}"',
                  f"    dynamic-cookie-key {cookie_key(gate)}"]
    for slot in range(1, slots.size + 1):
        taken = slots.taken.get(slot)
        address = taken[1] if taken else FREE_ADDRESS
        lines.append(f"    server {server_name(slot)} {address}:{gate.target_port}"
                     + ("" if taken else " disabled"))
    return lines
