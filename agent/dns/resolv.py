"""The resolv.conf a container gets when its node runs the resolver: the node's bridge gateway
as its only nameserver, its tenant's zone then the cluster's as search domains, and `ndots:5`
as Kubernetes sets it (any name with fewer than five dots — `web`, `db.payments`,
`db-0.db.payments`, `_8080._tcp.web` — is tried under the search domains first; the misses are
answered NXDOMAIN locally, from the cache, in microseconds)."""

from __future__ import annotations

from ccattler.agent.dns.zone import ZONE

NDOTS = 5


def container_resolv_conf(gateway: str, tenant: str) -> str:
    return (f"nameserver {gateway}\n"
            f"search {tenant.lower()}.{ZONE} {ZONE}\n"
            f"options ndots:{NDOTS}\n")
