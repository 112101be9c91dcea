"""`cca node-inspect NODE --dataplane`: what one node's kernel enforces, as the agent reads it back
from its own data plane (`programmed()`, never the agent's record of what it sent) with the plane's
per-entry hit counters beside each entry where its layout keeps them.

Counters, per plane (what `counters` in the report says, so a missing figure is never read as 0):

    nftables  VIP and external port: new connections (element counters of the `services` and
              `nodeports` maps: the nat hooks see a connection's first packet only); refused (no
              ready backend): packets; dropped per guarded identity: packets (named counter
              drop_<h>); allowed policy tuple: new connections admitted (element counters of the
              tuple sets; null for a table made before they had counters)
    ebpf      VIP: translations (connect()/unconnected sendmsg() through socket LB); allowed
              policy tuple: packets admitted; dropped per policed identity: packets; external
              port: new connections (the nftables plane beside it); refused: not available (an
              empty VIP fails connect() with EPERM, uncounted)
    memory    none: every counter is null (the in-memory plane of tests)

A policy's `local_addresses` are the guarded addresses on this node (nftables: the `guarded` map);
the BPF maps keep no locality, so the eBPF plane lists every address of the identity (its ingress
program sees only this node's sockets). Per backend there is no counter in either layout. `hits`
is null wherever a plane keeps no counter.
"""

from __future__ import annotations

from typing import Any

from ccattler.agent.dataplane.base import Backend, DataPlane, DataPlaneState, Frontend

NOT_AVAILABLE = "not available"

KINDS = ("services", "external", "backends", "refused", "allowed", "dropped")
#: What each plane's counters count; a kind a plane does not count says why, after NOT_AVAILABLE.
COUNTERS: dict[str, dict[str, str]] = {
    "nftables": {"services": "new connections (services map element counters; each retry of a "
                             "dropped SYN counts again)",
                 "external": "new connections (nodeports map element counters)",
                 "backends": f"{NOT_AVAILABLE}: the slots maps carry no counters",
                 "refused": "packets refused for want of a ready backend (counter refused)",
                 "allowed": "new connections admitted (t_/p_/s_ set element counters: the guarded "
                            "chain sees only packets not of an established flow)",
                 "dropped": "packets dropped per guarded identity (counter drop_<identity>)"},
    "ebpf": {"services": "socket LB translations (connect / unconnected sendmsg)",
             "external": "new connections (the nftables plane beside it: nodeports counters)",
             "backends": f"{NOT_AVAILABLE}: cca_backends values hold an address only",
             "refused": f"{NOT_AVAILABLE}: an empty VIP fails connect() with EPERM, uncounted",
             "allowed": "packets admitted per policy tuple (cca_policy values)",
             "dropped": "packets dropped per policed identity (cca_policed values)"},
}


def counted(meaning: str) -> bool:
    return not meaning.startswith(NOT_AVAILABLE)


def service_label(front: Frontend) -> str:
    """The key both planes' `counters()` use for a frontend: `vip:port/proto`, `*:port/proto`."""
    return f"{front.ip or '*'}:{front.port}/{front.protocol}"


def tuple_label(source: str, destination: str, port: int, protocol: str) -> str:
    """The key of one allowed policy tuple in `counters()["policy"]` (the eBPF plane's)."""
    return f"{source} -> {destination}:{port}/{protocol}"


def report(plane: DataPlane | None, kind: str, error: str | None = None,
           note: str | None = None) -> dict[str, Any]:
    """JSON-ready: the programmed state of `plane` (None: no plane made yet, `note` says why) with
    its counters; `kind` is the plane the node was asked to run, `error` its last apply failure."""
    out: dict[str, Any] = {"plane": plane.name if plane is not None else None, "requested": kind,
                           "error": error, "note": note, "services": [], "external": [],
                           "identities": [], "policies": [], "refused": None, "counters": {}}
    if plane is None:
        out["counters"] = dict.fromkeys(KINDS, f"{NOT_AVAILABLE}: nothing is programmed")
        return out
    read = getattr(plane, "inspect", None)  # both from one read of the kernel, where a plane can
    state, counts = read() if callable(read) else (plane.programmed(), _counters(plane))
    out["counters"] = dict.fromkeys(KINDS, f"{NOT_AVAILABLE}: the {plane.name} plane keeps no counters")
    out["counters"].update(COUNTERS.get(plane.name, {}))
    meaning = {what: counted(m) for what, m in out["counters"].items()}
    svc_hits, ext_hits = counts.get("services", {}), counts.get("external", {})
    tuple_hits, drops = counts.get("policy", {}), counts.get("dropped", {})
    out["services"] = [_frontend(f, bs, svc_hits.get(service_label(f)) if meaning.get("services") else None)
                       for f, bs in sorted(state.services.items())]
    out["external"] = [_frontend(f, bs, ext_hits.get(service_label(f)) if meaning.get("external") else None)
                       for f, bs in sorted(state.external.items())]
    out["identities"] = [{"identity": name, "addresses": sorted(ips)}
                         for name, ips in sorted(state.identities.items())]
    out["policies"] = [_policy(state, name, tuple_hits if meaning.get("allowed") else None,
                               drops.get(name, 0) if meaning.get("dropped") else None)
                       for name in sorted(state.policies)]
    if meaning.get("refused"):
        out["refused"] = counts.get("refused", 0)
    return out


def _counters(plane: DataPlane) -> dict[str, Any]:
    counters = getattr(plane, "counters", None)
    return counters() if callable(counters) else {}


def _frontend(front: Frontend, backends: tuple[Backend, ...], hits: int | None) -> dict[str, Any]:
    """One VIP (or external port) and its backends; `hits` stays None when the plane has no counter,
    and is 0 for a counted frontend that had none yet."""
    entry: dict[str, Any] = {"frontend": service_label(front), "port": front.port, "protocol": front.protocol,
                             "backends": [{"ip": b.ip, "port": b.port} for b in sorted(set(backends))],
                             "hits": hits}
    if front.ip:
        entry["vip"] = front.ip
    return entry


def _policy(state: DataPlaneState, name: str, hits: dict[str, int] | None, dropped: int | None) -> dict:
    ingress = state.policies[name]
    allowed = [{"source": src, "port": port, "protocol": proto,
                "hits": None if hits is None else hits.get(tuple_label(src, name, port, proto))}
               for src, port, proto in sorted(ingress.allowed)]
    return {"identity": name, "local_addresses": sorted(ingress.local_ips), "allowed": allowed,
            "dropped": dropped}


def relied_on(plane: dict[str, Any], source: str, destination: str, port: int | None,
              protocol: str) -> dict[str, Any]:
    """The entries of one node's report (`report()`) its kernel relies on for a new connection from
    identity `source` into `destination`'s instances on that node at `port`/`protocol`, and the
    verdict they give — the lookup the planes make (memory.py `admits`): a destination with no
    policy entry is open; a guarded one admits a source address of `source` on a tuple with that
    port or port 0, and that protocol or `any`. No port asked: only any-port tuples match. Also
    the VIPs whose backends are `destination`'s addresses, the way in through a service address."""
    policy = next((p for p in plane.get("policies", []) if p["identity"] == destination), None)
    sources = next((i["addresses"] for i in plane.get("identities", []) if i["identity"] == source), [])
    targets = set(next((i["addresses"] for i in plane.get("identities", []) if i["identity"] == destination),
                       policy["local_addresses"] if policy else []))
    vips = [s for s in plane.get("services", []) if targets & {b["ip"] for b in s["backends"]}]
    if policy is None:
        return {"verdict": "allowed", "why": f"{destination} has no default-deny entry on this node (open)",
                "source_addresses": sources, "destination": None, "tuples": [], "vips": vips}
    tuples = [t for t in policy["allowed"] if t["source"] == source and t["port"] in (0, port or 0)
              and t["protocol"] in ("any", protocol)]
    if tuples and sources:
        verdict, why = "allowed", f"{destination} is guarded here and a tuple from {source} matches"
    elif tuples:
        verdict, why = "denied", f"a tuple from {source} matches, but no address maps to {source} here"
    else:
        verdict, why = "denied", f"{destination} is guarded here and no tuple from {source} matches"
    return {"verdict": verdict, "why": why, "source_addresses": sources, "tuples": tuples, "vips": vips,
            "destination": {k: policy[k] for k in ("identity", "local_addresses", "dropped")}}
