"""The effective count: what the instance controller builds from (`derived/scale/<t>/<svc>`'s
`desired` when the service has a horizontal block, else the user's `instances`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.engine.facts import service_doc


def effective_service(service: Mapping[str, Any], scale: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not scale or not service_doc.horizontal(service):
        return service
    desired = scale.get("desired")
    if isinstance(desired, bool) or not isinstance(desired, int) or desired < 0:
        return service
    return service if desired == service.get("instances") else {**service, "instances": desired}
