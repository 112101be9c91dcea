"""Key schema: how fact keys are built and checked, and which writer owns each prefix.

Namespaced objects live at `desired/<kind>/<tenant>/<name>`, cluster-wide ones at
`desired/<kind>/<name>`; instances at `derived/instance/<tenant>/<service>/<instance>` with the
instance named `<service>-<suffix>`. docs/facts.md lists every prefix and its document shape.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ccattler.engine.facts.errors import InvalidKey, InvalidValue

DEFAULT_TENANT = "default"

#: Kinds whose objects belong to a tenant: `desired/<kind>/<tenant>/<name>`.
NAMESPACED_KINDS = frozenset(
    {"service", "secret", "connection", "gate", "group", "volume", "network"}
)
#: Cluster-wide kinds: `desired/<kind>/<name>`.
CLUSTER_KINDS = frozenset({"node", "tenant", "role", "policy", "grant", "lp"})

#: etcd's default request limit is 1.5 MiB; one document stays well below it.
MAX_VALUE_BYTES = 1024 * 1024
MAX_KEY_BYTES = 1024

# The key schema's prefixes (docs/facts.md lists each with its document shape). Every reader
# and writer names a prefix from here, so a grep for one finds all its users.
DESIRED = "desired/"
DERIVED = "derived/"
OBSERVED = "observed/"
AUDIT = "audit/"
SECRETS = "secret/"
#: Users and token hashes (engine/auth/).
AUTH = "auth/"
AUTH_USERS = "auth/user/"
AUTH_TOKENS = "auth/token/"
LEADER = "leader/"
#: The runner's leader lease (engine/runner/leader.py).
LEADER_RUNNER = "leader/runner"

# desired/<kind>/…: what users declared, written by the API server on apply.
DESIRED_SERVICES = "desired/service/"
DESIRED_NODES = "desired/node/"
DESIRED_TENANTS = "desired/tenant/"
DESIRED_CONNECTIONS = "desired/connection/"
DESIRED_SECRETS = "desired/secret/"
DESIRED_GATES = "desired/gate/"
DESIRED_GROUPS = "desired/group/"
DESIRED_VOLUMES = "desired/volume/"
DESIRED_NETWORKS = "desired/network/"
DESIRED_ROLES = "desired/role/"
DESIRED_POLICIES = "desired/policy/"
DESIRED_GRANTS = "desired/grant/"
#: Operator `.lp` programs (admission and network-policy extensions).
DESIRED_LP = "desired/lp/"

# derived/…: what the controllers decided.
INSTANCES = "derived/instance/"
#: Per service, the rolling update the rollout controller steps (engine/rollout): counts per spec
#: for the instance controller, the previous spec's fields for agents, state, reason and history.
ROLLOUTS = "derived/rollout/"
NODE_CONDITIONS = "derived/node/"
SUBNETS = "derived/network/subnet/"
ADDRESSES = "derived/network/ip/"
PLACEMENTS = "derived/placement/"
ENDPOINTS = "derived/endpoint/"
VIPS = "derived/vip/"
DNS = "derived/dns/"
FIREWALL = "derived/firewall/"
#: Per identity a firewall document allows or guards, its addresses cluster-wide (`derived/identity/
#: <tenant>/<service>`): shared by every node, so a move rewrites one small document, not each node's.
IDENTITIES = "derived/identity/"
#: The netpolicy controller's condition: `{"state": "failing"|"ok", …}` when an operator netpolicy
#: extension failed its budget (the firewall documents then stay the last good ones).
NETPOLICY_STATUS = "derived/netpolicy-status"
SCALE = "derived/scale/"
#: Per service, what the disruption controller asks of the instance and placement controllers:
#: surge instances, instances to remove, instances to move (docs/controllers.md).
DISRUPTIONS = "derived/disruption/"
#: Per draining node, what its drain waits for (shown by `cca get nodes` / `cca describe node`).
DRAINS = "derived/drain/"
#: The rebalancer's last cycle (its moves and their gains) and when each instance last moved.
REBALANCE = "derived/rebalance"

# observed/…: what the agents report.
OBSERVED_NODES = "observed/node/"
OBSERVED_INSTANCES = "observed/instance/"
METRICS = "observed/metric/"

#: A user's intent for a node (`cca drain`, `cca disable-node`; `cca enable-node` deletes it):
#: written by the API server only, never by an apply, so no file's next apply prunes it.
INTENT = "intent/"
NODE_INTENT = "intent/node/"

#: Claims on cluster-wide resources one object may hold at a time, written by the API server in
#: the same transaction as the apply that takes or releases them, guarded on their revision, so
#: two applies (through any API server on one store) never both win one.
CLAIMS = "claim/"
#: `claim/external-port/<proto>/<port>` → `{"service": "tenant/name", "port", "protocol"}`.
EXTERNAL_PORT_CLAIMS = "claim/external-port/"
#: `claim/shared-network` → `{"gained": {"tenant/group": ["tenant/service", …]}}`: rewritten by every
#: apply that makes a `share network` group list services it did not list before; applies writing
#: services guard on it (engine/admission/group_claims.py).
SHARED_NETWORK = "claim/shared-network"

#: One writer per key, decided by its prefix (longest prefix wins).
PREFIX_OWNERS: dict[str, str] = {
    DESIRED: "api",
    AUTH: "api",
    SECRETS: "api",
    AUDIT: "api",
    INTENT: "api",
    CLAIMS: "api",
    INSTANCES: "instance-controller",
    ROLLOUTS: "rollout-controller",
    NODE_CONDITIONS: "failure-controller",
    "derived/network/": "network-controller",
    PLACEMENTS: "placement-controller",
    ENDPOINTS: "endpoint-controller",
    VIPS: "network-controller",
    DNS: "network-controller",
    FIREWALL: "netpolicy-controller",
    IDENTITIES: "netpolicy-controller",
    NETPOLICY_STATUS: "netpolicy-controller",
    SCALE: "autoscaler",
    DISRUPTIONS: "disruption-controller",
    DRAINS: "disruption-controller",
    REBALANCE: "disruption-controller",
    OBSERVED_NODES: "agent",
    OBSERVED_INSTANCES: "agent",
    METRICS: "agent",
    LEADER: "runner",
}

# A name segment: letters, digits and `_ . : -`, starting with a letter or digit.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]*\Z")


def owner_of(key: str) -> str | None:
    """The writer that owns `key`, or None when no prefix claims it."""
    best = None
    for prefix, owner in PREFIX_OWNERS.items():
        if key.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, owner)
    return best[1] if best else None


def check_key(key: object, *, prefix: bool = False) -> str:
    """Return `key` if it is a valid fact key (or, with `prefix`, a valid range prefix)."""
    if not isinstance(key, str):
        raise InvalidKey(f"key must be a string, got {type(key).__name__}")
    if not key and not prefix:
        raise InvalidKey("key is empty")
    if "\x00" in key:
        raise InvalidKey(f"key {key!r} contains a NUL byte")
    if len(key.encode()) > MAX_KEY_BYTES:
        raise InvalidKey(f"key {key[:60]!r}… is longer than {MAX_KEY_BYTES} bytes")
    if not prefix and (key.startswith("/") or key.endswith("/") or "//" in key):
        raise InvalidKey(f"key {key!r} must be /-separated segments with none empty")
    return key


# Built once: json.dumps with options constructs a new encoder per call (a quarter of a put's CPU).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def check_value(value: object) -> bytes:
    """Encode `value` as canonical JSON bytes, rejecting non-JSON and oversized documents."""
    if value is None:
        raise InvalidValue("value must be a JSON document, got None")
    try:
        data = _ENCODER.encode(value).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidValue(f"value is not a JSON document: {exc}") from None
    if len(data) > MAX_VALUE_BYTES:
        raise InvalidValue(
            f"value is {len(data)} bytes; the limit is {MAX_VALUE_BYTES} bytes (1 MiB)"
        )
    return data


def _check_segment(name: str, what: str) -> str:
    if not _SEGMENT.match(name) or name in {".", ".."}:
        raise InvalidKey(f"{what} {name!r} is not a valid name (letters, digits, _ . : -)")
    return name


@dataclass(frozen=True, slots=True, order=True)
class ServiceRef:
    """A hierarchical service (or other namespaced object) name: `tenant/name`."""

    tenant: str
    name: str

    @property
    def full(self) -> str:
        return f"{self.tenant}/{self.name}"

    @property
    def display(self) -> str:
        """The name as a user writes it: the default tenant is left out."""
        return self.name if self.tenant == DEFAULT_TENANT else self.full

    def __str__(self) -> str:
        return self.display


def parse_service(text: str, tenant: str = DEFAULT_TENANT) -> ServiceRef:
    """Read `name` or `tenant/name`; a bare name resolves in `tenant`."""
    parts = text.split("/")
    if len(parts) == 1:
        return ServiceRef(_check_segment(tenant, "tenant"), _check_segment(parts[0], "name"))
    if len(parts) == 2:
        return ServiceRef(_check_segment(parts[0], "tenant"), _check_segment(parts[1], "name"))
    raise InvalidKey(f"name {text!r} has more than one '/' (expected name or tenant/name)")


def display_name(tenant: str, name: str) -> str:
    """`name` in the default tenant, `tenant/name` elsewhere (services and instances alike)."""
    return name if tenant == DEFAULT_TENANT else f"{tenant}/{name}"


def desired_key(kind: str, name: str, tenant: str | None = None) -> str:
    """The key of a declared object: namespaced kinds need a tenant, cluster kinds must not."""
    if kind in NAMESPACED_KINDS:
        if tenant is None:
            raise InvalidKey(f"kind {kind!r} is namespaced: a tenant is required")
        return f"{DESIRED}{kind}/{_check_segment(tenant, 'tenant')}/{_check_segment(name, 'name')}"
    if kind in CLUSTER_KINDS:
        if tenant is not None:
            raise InvalidKey(f"kind {kind!r} is cluster-wide: no tenant")
        return f"{DESIRED}{kind}/{_check_segment(name, 'name')}"
    raise InvalidKey(f"unknown kind {kind!r}")


def instance_key(service: ServiceRef, instance: str) -> str:
    """`derived/instance/<tenant>/<service>/<instance>`; `instance` is `<service>-<suffix>`."""
    return f"{INSTANCES}{service.tenant}/{service.name}/{_check_segment(instance, 'instance')}"


def placement_key(tenant: str, instance: str) -> str:
    """`derived/placement/<tenant>/<instance>`."""
    return f"{PLACEMENTS}{tenant}/{_check_segment(instance, 'instance')}"


def node_intent_key(node: str) -> str:
    """`intent/node/<node>`."""
    return NODE_INTENT + _check_segment(node, "node")


def observed_node_key(node: str) -> str:
    """`observed/node/<node>`: the node's own report (its agent is the only writer)."""
    return OBSERVED_NODES + node


def node_condition_key(node: str) -> str:
    """`derived/node/<node>`: the failure controller's condition of the node."""
    return NODE_CONDITIONS + node


def service_key(tenant: str, name: str) -> str:
    """`desired/service/<tenant>/<name>`, unchecked: for names read back from the store."""
    return f"{DESIRED_SERVICES}{tenant}/{name}"
