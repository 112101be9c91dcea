"""Service groups' documents (docs/facts.md, `desired/group`): the one rule both the compiler (lint
and admission) and the node agent check for `share network` groups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.engine.facts import service_doc


def port_clashes(services: Mapping[str, Any]) -> list[str]:
    """`t/a and t/b both listen on tcp 8080` for each port two of `services` (`t/svc` → its service
    document, or None when unknown) expose; in one network namespace they would fight over it
    (http counts as tcp)."""
    seen: dict[tuple[str, int], str] = {}
    clashes = []
    for name, doc in services.items():
        for expose in service_doc.expose(doc):
            proto = "udp" if expose.get("protocol") == "udp" else "tcp"
            port = (proto, int(expose.get("port") or 0))
            if port in seen and seen[port] != name:
                clashes.append(f"{seen[port]} and {name} both listen on {proto} {port[1]}")
            seen.setdefault(port, name)
    return clashes
