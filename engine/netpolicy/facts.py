"""Snapshot → typed facts of rules/netpolicy.lp (identities, rules, exposed ports, extensions).

Only `desired/service/`, `desired/network/` and netpolicy extensions (`desired/lp/` documents with
`"program": "netpolicy"`) are read: addresses never enter the logic.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from clingo import Symbol

from ccattler.engine.solve import Const, atom

SERVICES = "desired/service/"
RULES = "desired/network/"
EXTENSIONS = "desired/lp/"
PROTOCOLS = ("tcp", "udp")


def selector(name: str) -> Symbol | None:
    """`t/svc` → svc(t, "t/svc"), `t/*` → tenant(t), `*` → all; None for anything else."""
    if name == "*":
        return atom("all")
    tenant, sep, rest = name.partition("/")
    if not sep or not tenant or not rest:
        return None
    if rest == "*":
        return atom("tenant", tenant)
    return atom("svc", tenant, name)


def rule_facts(rule_id: str, doc: Mapping[str, Any]) -> list[Symbol]:
    """The facts of one `desired/network/<t>/<id>` document (a malformed one gives none)."""
    action, src, dst = doc.get("action"), selector(str(doc.get("from", ""))), selector(str(doc.get("to", "")))
    if action not in ("allow", "deny") or src is None or dst is None:
        return []
    facts = [atom("rule", rule_id, Const(action)), atom("rule_from", rule_id, src),
             atom("rule_to", rule_id, dst)]
    if isinstance(doc.get("port"), int):
        facts.append(atom("rule_port", rule_id, doc["port"]))
    if doc.get("protocol") in PROTOCOLS:
        facts.append(atom("rule_proto", rule_id, Const(doc["protocol"])))
    return facts


def service_facts(identity: str, doc: Mapping[str, Any]) -> list[Symbol]:
    facts = [atom("identity", identity, identity.split("/", 1)[0])]
    for entry in doc.get("expose") or []:
        if isinstance(entry, dict) and isinstance(entry.get("port"), int):
            proto = entry.get("protocol") if entry.get("protocol") in PROTOCOLS else "tcp"
            facts.append(atom("exposes", identity, entry["port"], Const(proto)))
    return facts


def snapshot_facts(values: Mapping[str, Any]) -> Iterator[Symbol]:
    """Every fact of the snapshot's services and network rules."""
    for key, doc in values.items():
        if not isinstance(doc, dict):
            continue
        if key.startswith(SERVICES):
            yield from service_facts(key[len(SERVICES):], doc)
        elif key.startswith(RULES):
            yield from rule_facts(key.rsplit("/", 1)[1], doc)


def extension_texts(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, text) of the stored netpolicy extensions, in key order."""
    return [(key, str(doc.get("text", ""))) for key, doc in sorted(values.items())
            if key.startswith(EXTENSIONS) and isinstance(doc, dict) and doc.get("program") == "netpolicy"]


def policy_inputs(values: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of the snapshot the logic depends on (a cheap key to skip re-solving)."""
    services = tuple(sorted((k, repr(v.get("expose")) if isinstance(v, dict) else None)
                            for k, v in values.items() if k.startswith(SERVICES)))
    rules = tuple(sorted(k for k in values if k.startswith(RULES)))
    return services, rules, tuple(extension_texts(values))
