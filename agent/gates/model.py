"""The gates of a node's slice: `desired/gate/<t>/<n>` documents (docs/facts.md) with the ready
endpoints of their target services (`derived/endpoint/<t>/<svc>`), as HAProxy will serve them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ccattler.engine.facts.keys import DESIRED_GATES, ENDPOINTS, OBSERVED_NODES

#: The port a gate listens on (HTTP); `gate` has no listen-port field yet.
DEFAULT_PORT = 80


@dataclass(frozen=True, slots=True)
class Sticky:
    cookie: str
    secure: bool = False
    http_only: bool = True
    same_site: str = "lax"


@dataclass(frozen=True, slots=True)
class Gate:
    """One gate's routing: what a reload must change (everything here) — backends are not in it."""

    name: str  # "tenant/gate"
    hosts: tuple[str, ...]
    path: str | None
    target: str  # "tenant/service"
    target_port: int
    sticky: Sticky | None = None
    affinity: str | None = None
    listen: int = DEFAULT_PORT

    @property
    def backend(self) -> str:
        """HAProxy's backend name: letters, digits, `_ - .` only (gate names allow `:` too)."""
        return "g_" + re.sub(r"[^A-Za-z0-9_.-]", "_", self.name.replace("/", "__"))


def gates_from_slice(facts: Mapping[str, Any]) -> tuple[list[Gate], list[str]]:
    """The well-formed gates, sorted by name, and one problem line per document that is not."""
    gates, problems = [], []
    for key in sorted(k for k in facts if k.startswith(DESIRED_GATES)):
        doc, name = facts[key], key[len(DESIRED_GATES):]
        try:
            gates.append(_gate(name, doc))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            problems.append(f"gate {name}: {exc}")
    return gates, problems


def _gate(name: str, doc: Any) -> Gate:
    if not isinstance(doc, dict):
        raise ValueError("the document is not an object")
    target, port = doc.get("target"), doc.get("port")
    if not isinstance(target, str) or "/" not in target:
        raise ValueError(f"target {target!r} is not tenant/service")
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"target port {port!r} is not a port")
    hosts = tuple(str(h).lower() for h in doc.get("hosts") or ())
    for host in hosts:
        if not re.fullmatch(r"[a-z0-9*][a-z0-9.*-]*", host):
            raise ValueError(f"host {host!r} is not a host name")
    path = doc.get("path")
    if path is not None and (not isinstance(path, str) or not path.startswith("/") or re.search(r"\s", path)):
        raise ValueError(f"path {path!r} is not an absolute path")
    sticky = doc.get("sticky")
    if isinstance(sticky, dict):
        cookie = str(sticky.get("cookie") or "")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", cookie):
            raise ValueError(f"sticky cookie {cookie!r} is not a cookie name")
        sticky = Sticky(cookie, bool(sticky.get("secure")), bool(sticky.get("http_only", True)),
                        str(sticky.get("same_site") or "lax"))
    else:
        sticky = None
    return Gate(name, hosts, None if path in (None, "/") else path.rstrip("/") or None, target, port,
                sticky, doc.get("affinity"), int(doc.get("listen") or DEFAULT_PORT))


def backend_addresses(facts: Mapping[str, Any], gate: Gate) -> dict[str, str]:
    """Instance → address of the target's ready endpoints that have an address (runc/netns)."""
    doc = facts.get(ENDPOINTS + gate.target)
    out = {}
    for entry in (doc or {}).get("endpoints") or () if isinstance(doc, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("ip"), str) and entry.get("instance"):
            out[str(entry["instance"])] = entry["ip"]
    return out


def node_address(facts: Mapping[str, Any], node: str) -> str | None:
    """The node's underlay address (its observed document), where its gates listen."""
    doc = facts.get(OBSERVED_NODES + node)
    address = doc.get("address") if isinstance(doc, dict) else None
    return address if isinstance(address, str) and address else None
