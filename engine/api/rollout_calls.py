"""`Rollout` of ccattler.v1.Cluster, mixed into `ClusterService`: `cca rollout status|history`
read a service's rollout document (capability service.read); `cca rollout undo` re-applies its
previous spec through admission (engine/admission/rollout_undo.py), so it is authorized, judged
and audited like any change."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from ccattler.engine.api.calls import Call
from ccattler.engine.api.errors import BadRequest, NotFound
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.facts import DEFAULT_TENANT, CcaError, parse_service
from ccattler.engine.facts.keys import DESIRED_SERVICES, ROLLOUTS
from ccattler.engine.store import Store

ACTIONS = ("status", "history", "undo")


def rollout_summary(request: Any) -> str:
    """The audit record's object: `rollout undo shop/web`."""
    tenant = request.tenant + "/" if request.tenant else ""
    return f"rollout {request.action} {tenant}{request.service}"


def rollout_view(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document without the spec fields (they can be large), with each spec's image named."""
    fields = doc.get("fields") or {}
    images = {spec: (f or {}).get("image") for spec, f in fields.items() if isinstance(f, Mapping)}
    view = {k: v for k, v in doc.items() if k != "fields"}
    view["images"] = images
    previous = doc.get("previous")
    view["previous_spec"] = ({"spec": previous, **fields[previous]}
                             if previous and isinstance(fields.get(previous), Mapping) else None)
    return view


class RolloutCalls:
    """Needs `store` and `_allow(call, capability, resource)` from the service."""

    store: Store
    _allow: Callable[..., None]

    def Rollout(self, request: api_pb2.RolloutRequest, call: Call) -> api_pb2.Json:
        if request.action not in ACTIONS:
            raise BadRequest(f"rollout {request.action!r}: expected one of {', '.join(ACTIONS)}")
        if not request.service:
            raise BadRequest("rollout needs a service name")
        try:
            ref = parse_service(request.service, request.tenant or DEFAULT_TENANT)
        except CcaError as exc:
            raise BadRequest(f"service: {exc}") from None
        if request.action == "undo":
            from ccattler.engine.admission.rollout_undo import undo_rollout

            assert call.principal is not None
            result = undo_rollout(self.store, call.principal, ref.full, tenant=ref.tenant,
                                  dry_run=request.dry_run)
            return api_pb2.Json(json=json.dumps(asdict(result), default=str))
        self._allow(call, "service.read", ref.full)
        fact = self.store.get(ROLLOUTS + ref.full)
        if fact is None or not isinstance(fact.value, Mapping):
            if self.store.get(f"{DESIRED_SERVICES}{ref.full}") is None:
                raise NotFound(f"service {ref.display} not found")
            raise NotFound(f"service {ref.display} has no rollout yet (the rollout controller has not "
                           "seen it: is the server's runner running?)")
        return api_pb2.Json(json=json.dumps(rollout_view(fact.value), default=str))
