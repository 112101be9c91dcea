"""A node's slice of the state: what its agent may watch (its placements and instance addresses, the
specs and instances they need, its firewall, node condition, subnets, endpoints and names), never
secrets or other nodes' placements and rules. `node_slice` streams it: the current slice first (when
not resuming), then changes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ccattler.engine.store import Event, Store

#: Prefixes every node sees whole (service specs and routing data are cluster-wide).
_SHARED = ("desired/service/", "derived/instance/", "derived/endpoint/", "derived/vip/", "derived/dns/",
           "derived/network/subnet/")


def _visible(node: str, event: Event) -> bool:
    key = event.key
    if key.startswith(("derived/placement/", "derived/network/ip/")):
        doc = event.value if event.value is not None else event.prev_value
        return doc is None or doc.get("node") == node
    if key.startswith(_SHARED):
        return True
    return key in (f"derived/firewall/{node}", f"derived/node/{node}", f"desired/node/{node}")


def node_slice(store: Store, node: str, from_revision: int, active: Callable[[], bool]) -> Iterator[Event]:
    """Events of `node`'s slice after `from_revision`; with 0, the current slice as puts first."""
    if from_revision <= 0:
        facts, from_revision = store.range("")
        for fact in facts:
            event = Event("put", fact.key, fact.value, fact.mod_revision)
            if _visible(node, event):
                yield event
        yield Event("synced", "", None, from_revision)  # type: ignore[arg-type]
    with store.watch("", from_revision) as watch:
        while active():
            event = watch.get(timeout=1.0)
            if event is not None and (event.kind == "resync" or _visible(node, event)):
                yield event
