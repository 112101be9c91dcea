"""Which observed keys a node may write with `Agent.Report`: only its own instances' state (judged
against placement) and its own samples of declared services' metrics.

`report_view` reads what the judgement needs (current documents, placements, which of the
metrics' services are declared) in two store reads; `check_report` is pure over that view, so the
handler calls it per observation and the whole batch is refused (PERMISSION_DENIED, audited by
the call layer as a denial) at the first key that is not the node's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ccattler.engine.api.errors import BadRequest, Forbidden
from ccattler.engine.facts import CcaError, parse_service
from ccattler.engine.facts.keys import (
    DESIRED_SERVICES,
    METRICS,
    OBSERVED_INSTANCES,
    OBSERVED_NODES,
    PLACEMENTS,
)
from ccattler.engine.store import Store


@dataclass(frozen=True, slots=True)
class ReportView:
    """What the store holds for one report's keys."""

    #: observed key → its current document (absent: no document yet).
    current: Mapping[str, Any]
    #: `tenant/instance` → the node it is placed on (absent: not placed).
    placed: Mapping[str, str | None]
    #: The `tenant/service`s of the reported metric samples that are declared.
    declared: frozenset[str]


def _instance_ref(key: str) -> str | None:
    parts = key.split("/")
    return f"{parts[2]}/{parts[3]}" if key.startswith(OBSERVED_INSTANCES) and len(parts) == 4 else None


def _metric_service(key: str) -> str | None:
    parts = key.split("/")  # observed/metric/<tenant>/<service>/<name>/<node>
    return f"{parts[2]}/{parts[3]}" if key.startswith(METRICS) and len(parts) == 6 else None


def report_view(store: Store, keys: Iterable[str], current: Mapping[str, Any]) -> ReportView:
    """The placements of the reported instances and which reported metrics' services are declared
    (`current`: the reported keys' facts, already read by the caller for its guarded txn)."""
    keys = list(keys)
    instances = {ref for ref in map(_instance_ref, keys) if ref}
    services = {ref for ref in map(_metric_service, keys) if ref}
    facts = store.get_many([PLACEMENTS + ref for ref in instances]
                           + [DESIRED_SERVICES + ref for ref in services])
    placed = {ref: _node_of(facts.get(PLACEMENTS + ref)) for ref in instances}
    declared = frozenset(ref for ref in services if DESIRED_SERVICES + ref in facts)
    return ReportView({k: getattr(f, "value", f) for k, f in current.items() if f is not None},
                      placed, declared)


def _node_of(fact: Any) -> str | None:
    value = getattr(fact, "value", None)
    return value.get("node") if isinstance(value, dict) else None


def check_report(node: str, key: str, value: Mapping[str, Any] | None, view: ReportView) -> None:
    """Raise `Forbidden` unless `node` may write `value` (None: delete) at `key`.

    - `observed/instance/<t>/<inst>`: the document's `node` is the caller, and the instance is
      placed on the caller — or the current document is already the caller's (an instance that
      moved away or whose service was deleted is still stopped and reported by its old node).
      Deleting a document that does not exist changes nothing and is let through.
    - `observed/metric/<t>/<svc>/<name>/<node>`: the caller's own sample of a declared service
      (a node measures services it does not run: requests at its gates, connections its clients
      open to a VIP — agent/service_metrics.py); deleting its own sample always passes.
    - anything else, another node's document included, is refused; the node's own
      `observed/node/<node>` is RegisterNode's (it carries the lease).
    """
    instance = _instance_ref(key)
    if instance is not None:
        try:
            parse_service(instance)
        except CcaError as exc:
            raise BadRequest(f"report key {key!r}: {exc}") from None
        current = view.current.get(key)
        owner = current.get("node") if isinstance(current, dict) else None
        if value is not None and value.get("node") != node:
            raise Forbidden(f"node {node} may not report {key}: its document names node "
                            f"{value.get('node')!r}, not {node}")
        if view.placed.get(instance) == node or owner == node or (value is None and current is None):
            return
        where = view.placed.get(instance)
        raise Forbidden(f"node {node} may not report {key}: that instance is "
                        + (f"placed on {where}" if where else "not placed on any node"))
    service = _metric_service(key)
    if service is not None and key.rsplit("/", 1)[1] == node:
        if value is None or service in view.declared:
            return
        raise Forbidden(f"node {node} may not report {key}: service {service} is not declared")
    if key == f"{OBSERVED_NODES}{node}":
        raise BadRequest("report the node document with RegisterNode (it carries the node's lease)")
    raise Forbidden(f"node {node} may not write {key!r}: only its own observed/ keys")
