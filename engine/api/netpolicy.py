"""Live `cca explain connection|service`: rules/netpolicy.lp over a snapshot of the store (nothing
written), and the policy effect of files for `cca plan`/`cca diff` (connections opened/closed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ccattler.engine.facts import InvalidValue
from ccattler.engine.facts.keys import (
    DESIRED_LP,
    DESIRED_NETWORKS,
    DESIRED_SERVICES,
    FIREWALL,
    NETPOLICY_STATUS,
)
from ccattler.engine.netpolicy import explain_connection, explain_service, parse_endpoint
from ccattler.engine.runner.snapshot import read_snapshot
from ccattler.engine.store import Store

#: What the network-policy logic reads (addresses stay out of it).
NETPOLICY_PREFIXES = (DESIRED_SERVICES, DESIRED_NETWORKS, DESIRED_LP)


def explain_network_live(store: Store, kind: str, source: str, destination: str, tenant: str,
                         visible: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """`visible(service)`: whether the caller may read a source the answer would name (others are
    hidden in `explain service`)."""
    # The firewall documents answer when an operator extension's solve fails (explain.py).
    values = read_snapshot(store, (*NETPOLICY_PREFIXES, FIREWALL, NETPOLICY_STATUS)).values
    if kind == "service":
        identity, _, _ = parse_endpoint(destination, tenant)
        return explain_service(values, identity, visible)
    if kind == "connection":
        if not source or not destination:
            raise InvalidValue("explain connection needs SOURCE and DESTINATION[:PORT[/tcp|udp]]")
        src, _, _ = parse_endpoint(source, tenant)
        dst, port, protocol = parse_endpoint(destination, tenant)
        return explain_connection(values, src, dst, port, protocol)
    raise InvalidValue(f"unknown network explain kind {kind!r} (connection or service)")


def diff_connections(store: Store, diff: Any) -> dict[str, list[Any]]:
    """Which connections applying `diff` (an admission Diff) would open or close."""
    from ccattler.engine.netpolicy.effect import connection_changes

    before = dict(read_snapshot(store, NETPOLICY_PREFIXES).values)
    after = dict(before)
    for change in (*diff.added, *diff.changed):
        if change.ref.key.startswith(NETPOLICY_PREFIXES) and change.new is not None:
            after[change.ref.key] = change.new
    for change in diff.removed:
        after.pop(change.ref.key, None)
    if not any(k.startswith(DESIRED_NETWORKS) for k in (*before, *after)):
        return {"opened": [], "closed": []}  # no rule anywhere: everything stays open
    return connection_changes(before, after)
