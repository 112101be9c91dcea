"""Who may read a key: each prefix's read guard, the capability whose `.read` it needs and which
key segment names the tenant. Beside `keys.PREFIX_OWNERS` (one writer per prefix), this is the
one reader rule per prefix; the API's Get, Watch, events and top filter by it
(engine/api/read_access.py asks admission). docs/api.md "Reading: authorization follows the key".
"""

from __future__ import annotations

from dataclasses import dataclass

from ccattler.engine.facts.keys import (
    ADDRESSES,
    AUDIT,
    AUTH,
    CLAIMS,
    DESIRED,
    DESIRED_CONNECTIONS,
    DESIRED_GRANTS,
    DESIRED_LP,
    DESIRED_NETWORKS,
    DESIRED_NODES,
    DESIRED_POLICIES,
    DESIRED_ROLES,
    DESIRED_SECRETS,
    DESIRED_TENANTS,
    DISRUPTIONS,
    DNS,
    DRAINS,
    ENDPOINTS,
    FIREWALL,
    IDENTITIES,
    INSTANCES,
    LEADER,
    METRICS,
    NETPOLICY_STATUS,
    NODE_CONDITIONS,
    NODE_INTENT,
    OBSERVED_INSTANCES,
    OBSERVED_NODES,
    PLACEMENTS,
    REBALANCE,
    ROLLOUTS,
    SCALE,
    SECRETS,
    SUBNETS,
    VIPS,
)

#: Who may read a key: prefix → (capability kind whose `.read` guards it — `cluster` means
#: cluster.admin —, index of the key segment naming the tenant, or None for a cluster-wide key).
#: Longest prefix wins; a key no prefix claims (`auth/`, `secret/` values, anything new) needs
#: cluster.admin. Get, Watch and events filter by it (engine/api/read_access.py); a test checks
#: that the desired/ rows agree with admission's OBJECT_CAPABILITY_KIND.
READ_GUARDS: dict[str, tuple[str, int | None]] = {
    **{f"{DESIRED}{kind}/": ("service", 2) for kind in ("service", "gate", "volume", "group")},
    DESIRED_SECRETS: ("secret", 2),
    DESIRED_CONNECTIONS: ("secret", 2),
    DESIRED_NETWORKS: ("network", 2),
    DESIRED_NODES: ("node", None),
    DESIRED_TENANTS: ("tenant", None),
    DESIRED_ROLES: ("role", None),
    DESIRED_GRANTS: ("role", None),
    DESIRED_POLICIES: ("policy", None),
    DESIRED_LP: ("policy", None),
    **{p: ("service", 2) for p in (INSTANCES, ROLLOUTS, PLACEMENTS,
                                   ENDPOINTS, VIPS, DNS, SCALE, IDENTITIES,
                                   DISRUPTIONS, OBSERVED_INSTANCES, METRICS)},
    ADDRESSES: ("service", 3),
    SUBNETS: ("node", None),
    NODE_CONDITIONS: ("node", None),
    FIREWALL: ("node", None),  # every tenant's sources the node's destinations allow: not one tenant's
    NETPOLICY_STATUS: ("policy", None),  # names the operator's failing netpolicy extensions
    DRAINS: ("node", None),
    REBALANCE: ("node", None),
    OBSERVED_NODES: ("node", None),
    NODE_INTENT: ("node", None),
    AUDIT: ("audit", None),
    LEADER: ("service", None),  # what `cca status` shows
    SECRETS: ("cluster", None),  # encrypted values: metadata comes from views.secrets
    AUTH: ("cluster", None),  # users and token hashes
    CLAIMS: ("cluster", None),  # name services of every tenant
}


@dataclass(frozen=True, slots=True)
class ReadGuard:
    """What reading a key needs: `capability`.read (`cluster`: cluster.admin) in `tenant`
    (None: cluster-wide, or every tenant when a prefix does not name one)."""

    capability: str
    tenant: str | None


_CLUSTER_ONLY = ReadGuard("cluster", None)


#: Guard prefixes not ending in "/" (a single key such as `derived/rebalance`).
_UNSLASHED = tuple(p for p in READ_GUARDS if not p.endswith("/"))


def _guard_prefix(key: str) -> str | None:
    """The longest guard prefix of `key`: dictionary lookups of its first 3, 2, 1 segments (a
    watch judges every event: this is its per-key cost), then the unslashed ones."""
    parts = key.split("/", 3)
    for n in (3, 2, 1):
        if len(parts) > n and (candidate := "/".join(parts[:n]) + "/") in READ_GUARDS:
            return candidate
    return next((p for p in _UNSLASHED if key.startswith(p)), None)


def read_guard(key: str) -> ReadGuard:
    """The guard of one full key (`desired/service/shop/web` → service.read in `shop`)."""
    prefix = _guard_prefix(key)
    if prefix is None:
        return _CLUSTER_ONLY
    capability, index = READ_GUARDS[prefix]
    if index is None:
        return ReadGuard(capability, None)
    parts = key.split("/")
    if len(parts) <= index + 1 or not parts[index]:  # no complete tenant segment: not a tenant's key
        return _CLUSTER_ONLY
    return ReadGuard(capability, parts[index])


def prefix_guard(prefix: str) -> ReadGuard | None:
    """The one guard covering every key under `prefix`, or None when keys under it have different
    guards (several kinds or tenants: each key must then be judged on its own)."""
    inside = _guard_prefix(prefix)
    if inside is not None and not any(p.startswith(prefix) and len(p) > len(inside) for p in READ_GUARDS):
        capability, index = READ_GUARDS[inside]
        if index is None:
            return ReadGuard(capability, None)
        parts = prefix.split("/")
        return ReadGuard(capability, parts[index]) if len(parts) > index + 1 and parts[index] else None
    if inside is None and not any(p.startswith(prefix) for p in READ_GUARDS):
        return _CLUSTER_ONLY  # only keys nobody but the admin reads
    return None
