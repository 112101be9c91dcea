"""`derived/firewall/<node>` (the network-policy controller's document) and the `derived/identity/`
documents it mentions → the data plane contract's `DataPlaneState.identities` and `.policies`
(agent/dataplane/base.py).

Only default-deny identities appear in `policies`; an identity the document does not police is open.
`identities` holds every identity the policies mention (each guarded one and each allowed source)
that has an identity document: its addresses cluster-wide; one without a document has no address
(an allow from it admits nothing until its addresses arrive: fail closed).
`decided()` names the identities whose policy the document has settled for this node (`policies`
and `open`): the agent starts an instance only once its identity is among them (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.agent.dataplane.base import PolicyIngress

_PROTOCOLS = ("tcp", "udp", "any")


def policies_of(doc: Mapping[str, Any] | None) -> dict[str, PolicyIngress]:
    """Identity → its ingress rules, from one firewall document; a missing or malformed document
    polices nothing."""
    if not isinstance(doc, Mapping):
        return {}
    policies = {}
    for identity, entry in (doc.get("policies") or {}).items():
        if not isinstance(entry, Mapping):
            continue
        allowed = frozenset((str(t["from"]), int(t.get("port") or 0), str(t.get("protocol") or "any"))
                            for t in entry.get("allowed") or []
                            if isinstance(t, Mapping) and t.get("from") and
                            (t.get("protocol") or "any") in _PROTOCOLS)
        local = frozenset(str(a) for a in entry.get("local") or [])
        policies[str(identity)] = PolicyIngress(str(identity), local, allowed)
    return policies


def mentioned(policies: Mapping[str, PolicyIngress]) -> set[str]:
    """The identities whose addresses `policies` need: each guarded one and each allowed source."""
    return set(policies) | {source for p in policies.values() for source, _, _ in p.allowed}


def addresses_of(doc: Any) -> frozenset[str]:
    """The addresses of one `derived/identity/` document (none when it is missing or malformed)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("addresses"), list):
        return frozenset()
    return frozenset(str(a) for a in doc["addresses"])


def policy_state(doc: Mapping[str, Any] | None, identity_docs: Mapping[str, Any] | None = None
                 ) -> tuple[dict[str, frozenset[str]], dict[str, PolicyIngress]]:
    """(identity → all its addresses, identity → its ingress rules) of one firewall document and
    the identity documents (identity → `derived/identity/` document) of what it mentions."""
    policies, docs = policies_of(doc), identity_docs or {}
    found = {name: addresses_of(docs.get(name)) for name in sorted(mentioned(policies))}
    return {name: ips for name, ips in found.items() if ips}, policies


def decided(doc: Mapping[str, Any] | None) -> frozenset[str]:
    """The identities a firewall document settles for its node: the guarded ones (`policies`) and
    the ones it lists as open (`open`). An identity in neither is not decided yet (the controller
    has not seen its instance here, or its solve is failing): its instances wait."""
    if not isinstance(doc, Mapping):
        return frozenset()
    guarded = doc.get("policies") if isinstance(doc.get("policies"), Mapping) else {}
    listed = doc.get("open") if isinstance(doc.get("open"), list) else []
    return frozenset(str(i) for i in guarded) | frozenset(str(i) for i in listed)
