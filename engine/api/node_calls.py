"""`NodeIntent` of ccattler.v1.Cluster (`cca drain`, `cca disable-node`, `cca enable-node`),
mixed into `ClusterService`: the user's intent for a node is its own key, `intent/node/<node>`,
written here only (an apply never prunes it); the failure controller turns it into the node's
condition (`derived/node/<node>`) and the disruption controller drains within the budgets."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ccattler.engine.api.calls import Call
from ccattler.engine.api.errors import BadRequest, NotFound
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.facts import CcaError
from ccattler.engine.facts.keys import DESIRED_NODES, NODE_CONDITIONS, OBSERVED_NODES, node_intent_key
from ccattler.engine.store import Store

INTENTS = ("drain", "disable", "enable")


def intent_summary(request: Any) -> str:
    """The audit record's object: `drain node n3`."""
    return f"{request.intent or '?'} node {request.node or '?'}"


class NodeCalls:
    """Needs `store` and `_allow(call, capability, resource)` from the service."""

    store: Store
    _allow: Callable[..., None]

    def NodeIntent(self, request: api_pb2.NodeIntentRequest, call: Call) -> api_pb2.Json:
        if request.intent not in INTENTS:
            raise BadRequest(f"intent {request.intent!r}: expected one of {', '.join(INTENTS)}")
        try:
            key = node_intent_key(request.node)
        except CcaError as exc:
            raise BadRequest(f"node: {exc}") from None
        self._allow(call, "node.update", request.node)
        node = request.node
        known = any(self.store.get(f"{prefix}{node}") is not None
                    for prefix in (OBSERVED_NODES, NODE_CONDITIONS, DESIRED_NODES))
        if not known and self.store.get(key) is None:
            raise NotFound(f"node {node!r} is not known (cca get nodes)")
        principal = call.principal
        if request.intent == "enable":
            existed = self.store.get(key) is not None
            revision = self.store.delete(key) if existed else self.store.revision()
        else:
            doc = {"node": node, "intent": request.intent, "at": time.time(),
                   "by": f"{principal.kind}:{principal.name}" if principal else "anonymous"}
            revision = self.store.put(key, doc)
        return api_pb2.Json(json=json.dumps({"node": node, "intent": request.intent, "key": key,
                                             "revision": revision}))
