"""`derived/firewall/<node>` (the network-policy controller's document) → the data plane contract's
`DataPlaneState.identities` and `.policies` (agent/dataplane/base.py).

Only default-deny identities appear in `policies`; an identity the document does not police is open.
`decided()` names the identities whose policy the document has settled for this node (`policies`
and `open`): the agent starts an instance only once its identity is among them (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.agent.dataplane.base import PolicyIngress

_PROTOCOLS = ("tcp", "udp", "any")


def policy_state(doc: Mapping[str, Any] | None) -> tuple[dict[str, frozenset[str]], dict[str, PolicyIngress]]:
    """(identity → all its addresses, identity → its ingress rules) of one firewall document; a
    missing or malformed document polices nothing."""
    if not isinstance(doc, Mapping):
        return {}, {}
    identities = {str(i): frozenset(str(a) for a in addrs)
                  for i, addrs in (doc.get("identities") or {}).items() if isinstance(addrs, list)}
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
    return identities, policies


def decided(doc: Mapping[str, Any] | None) -> frozenset[str]:
    """The identities a firewall document settles for its node: the guarded ones (`policies`) and
    the ones it lists as open (`open`). An identity in neither is not decided yet (the controller
    has not seen its instance here, or its solve is failing): its instances wait."""
    if not isinstance(doc, Mapping):
        return frozenset()
    guarded = doc.get("policies") if isinstance(doc.get("policies"), Mapping) else {}
    listed = doc.get("open") if isinstance(doc.get("open"), list) else []
    return frozenset(str(i) for i in guarded) | frozenset(str(i) for i in listed)
