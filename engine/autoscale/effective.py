"""The effective service: what the instance and rollout controllers build from. Its count is
`derived/scale/<t>/<svc>`'s `desired` when the service has a horizontal block (else the user's
`instances`); its resources are the autoscaler's applied vertical `requests` when the service has
a vertical block and the user's `resources` are still those the requests were computed from
(`base`: a new apply of other resources wins at once)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.engine.facts import service_doc


def _count(scale: Mapping[str, Any]) -> int | None:
    desired = scale.get("desired")
    if isinstance(desired, bool) or not isinstance(desired, int) or desired < 0:
        return None
    return desired


def vertical_requests(service: Mapping[str, Any], scale: Mapping[str, Any] | None) -> dict[str, int] | None:
    """The resources the autoscaler set, or None (no vertical block, none applied, or stale)."""
    if not scale or not service_doc.vertical(service):
        return None
    requests, base = scale.get("requests"), scale.get("base")
    if not isinstance(requests, Mapping) or base != dict(service_doc.resources(service)):
        return None
    good = {k: v for k, v in requests.items() if k in ("cpu", "memory") and isinstance(v, int)
            and not isinstance(v, bool) and v > 0}
    return {**service_doc.resources(service), **good} if good else None


def effective_service(service: Mapping[str, Any], scale: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not scale:
        return service
    out = service
    if service_doc.horizontal(service):
        desired = _count(scale)
        if desired is not None and desired != service.get("instances"):
            out = {**out, "instances": desired}
    resources = vertical_requests(service, scale)
    if resources is not None and resources != service.get("resources"):
        out = {**out, "resources": resources}
    return out
