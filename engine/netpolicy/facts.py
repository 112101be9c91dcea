"""Snapshot → typed facts of rules/netpolicy.lp (identities, rules, exposed ports, extensions).

Only `desired/service/`, `desired/network/` and netpolicy extensions (`desired/lp/` documents with
`"program": "netpolicy"`) are read: addresses never enter the logic.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from typing import Any

from clingo import Symbol

from ccattler.engine.facts import service_doc
from ccattler.engine.facts.keys import DESIRED_LP, DESIRED_NETWORKS, DESIRED_SERVICES
from ccattler.engine.solve import Const, atom

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
    facts = [atom("identity", identity, identity.split("/", 1)[0])]  # the same as in snapshot_facts
    for entry in service_doc.expose(doc):
        if isinstance(entry, dict) and isinstance(entry.get("port"), int):
            proto = entry.get("protocol") if entry.get("protocol") in PROTOCOLS else "tcp"
            facts.append(atom("exposes", identity, entry["port"], Const(proto)))
    return facts


def snapshot_facts(values: Mapping[str, Any], part: Part | None = None) -> Iterator[Symbol]:
    """Every fact of the snapshot's services and network rules — or, for a partial solve, every
    identity but only the part's destinations' ports and the part's rules."""
    for key, doc in values.items():
        if not isinstance(doc, dict):
            continue
        if key.startswith(DESIRED_SERVICES):
            identity = key[len(DESIRED_SERVICES):]
            if part is None or identity in part.destinations:
                yield from service_facts(identity, doc)
            elif identity in part.identities:
                yield atom("identity", identity, identity.split("/", 1)[0])
        elif key.startswith(DESIRED_NETWORKS) and (part is None or key in part.rules):
            yield from rule_facts(key.rsplit("/", 1)[1], doc)


@dataclass(frozen=True)
class Part:
    """What a partial solve covers: destination identities, and the rule keys it reads (every
    rule whose `to` selects one of them or whose `from` selects a changed service, plus the
    changed rules: so the lints of every rule the change can affect are exact)."""

    destinations: frozenset[str]
    rules: frozenset[str]

    identities: frozenset[str]  # the identities those rules select (the others change nothing)

    @staticmethod
    def of(values: Mapping[str, Any], destinations: Set[str], changed: Iterable[str],
           identities: Set[str]) -> Part:
        services = {key[len(DESIRED_SERVICES):] for key in changed if key.startswith(DESIRED_SERVICES)}
        rules, named = set(), set(destinations)
        for key, doc in values.items():
            if not key.startswith(DESIRED_NETWORKS) or not isinstance(doc, dict):
                continue
            to, src = str(doc.get("to", "")), str(doc.get("from", ""))
            if key in changed or selected(to, destinations) or selected(src, services):  # lints too
                rules.add(key)
                named |= selected(to, identities) | selected(src, identities)
        rules |= {key for key in changed if key.startswith(DESIRED_NETWORKS)}  # removed ones: their lints go
        return Part(frozenset(destinations), frozenset(rules), frozenset(named))

    def rule_ids(self) -> set[str]:
        return {key.rsplit("/", 1)[1] for key in self.rules}


def names(selector_text: str, identity: str) -> bool:
    """Whether a rule's `from`/`to` text (`t/svc`, `t/*`, `*`) selects `identity` — the logic's
    `selects/2`, in Python to find what a change touches before solving."""
    if selector_text == "*":
        return True
    if selector_text.endswith("/*"):
        return identity.split("/", 1)[0] == selector_text[:-2]
    return selector_text == identity


def touched_destinations(before: Mapping[str, Any], after: Mapping[str, Any], changed: Iterable[str],
                         identities: Set[str]) -> set[str] | None:
    """The destination identities whose policy a change of keys `changed` (old values `before`, new
    `after`) can alter, or None when only a full solve is exact (an extension changed).

    A rule touches what its `to` selects (old and new text); a service that appears, goes or
    changes its ports touches itself and every destination of a rule whose `from` selects it."""
    rules_after = [
        doc for key, doc in after.items() if key.startswith(DESIRED_NETWORKS) and isinstance(doc, dict)
    ]
    out: set[str] = set()
    for key in changed:
        if key.startswith(DESIRED_LP):
            return None
        if key.startswith(DESIRED_NETWORKS):
            for doc in (before.get(key), after.get(key)):
                if isinstance(doc, dict):
                    out |= selected(str(doc.get("to", "")), identities)
        elif key.startswith(DESIRED_SERVICES):
            identity = key[len(DESIRED_SERVICES):]
            old, new = before.get(key), after.get(key)
            if isinstance(old, dict) and isinstance(new, dict) and \
                    service_facts(identity, old) == service_facts(identity, new):
                continue  # a change the logic does not read (image, env, …)
            out.add(identity)
            for doc in rules_after:
                if names(str(doc.get("from", "")), identity):
                    out |= selected(str(doc.get("to", "")), identities)
    return out


def selected(selector_text: str, identities: Set[str]) -> set[str]:
    """The identities of `identities` a selector text selects."""
    if selector_text == "*" or selector_text.endswith("/*"):
        return {i for i in identities if names(selector_text, i)}
    return {selector_text} & identities


def extension_texts(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, text) of the stored netpolicy extensions, in key order."""
    found = [(key, doc) for key, doc in values.items() if key.startswith(DESIRED_LP)]
    return [(key, str(doc.get("text", ""))) for key, doc in sorted(found)
            if isinstance(doc, dict) and doc.get("program") == "netpolicy"]


def extensions_digest(values: Mapping[str, Any]) -> str:
    """A digest of the stored extensions' keys and texts (the netpolicy status names what failed)."""
    import hashlib

    found = hashlib.sha256()
    for key, text in extension_texts(values):
        found.update(f"{len(key)}:{key}{len(text)}:{text}".encode("utf-8", "surrogateescape"))
    return found.hexdigest()


def policy_inputs(values: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of the snapshot the logic depends on (a cheap key to skip re-solving)."""
    services = tuple(sorted((k, repr(v.get("expose")) if isinstance(v, dict) else None)
                            for k, v in values.items() if k.startswith(DESIRED_SERVICES)))
    rules = tuple(sorted(k for k in values if k.startswith(DESIRED_NETWORKS)))
    return services, rules, tuple(extension_texts(values))
