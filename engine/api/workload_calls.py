"""The workload calls of ccattler.v1.Cluster, mixed into `ClusterService`: `Scale` (`cca scale`),
`Logs` and `Exec`
(through the agents' tunnels), `Top` (usage the agents observe), `MetricSet` (`cca metric set`) and
`NodeInspect` (a node runtime's own view, asked through its tunnel)."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator
from typing import Any

from ccattler.engine.api import top, workloads
from ccattler.engine.api.calls import Call
from ccattler.engine.api.errors import BadRequest, NotFound
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.read_access import ReadAccess
from ccattler.engine.api.tunnel import TunnelHub
from ccattler.engine.facts import DEFAULT_TENANT, CcaError, parse_service
from ccattler.engine.facts.keys import DESIRED_SERVICES, INSTANCES, METRICS, NODE_CONDITIONS, OBSERVED_NODES
from ccattler.engine.store import Store

INSPECT_TIMEOUT = 15.0
DATAPLANE = "dataplane"  # NodeInspect's GetRequest.kind: the node's data plane too (read back by its agent)


def _tenant(request: Any) -> str:
    tenant = request.tenant or DEFAULT_TENANT
    parse_service("x", tenant)  # checks the tenant name
    return tenant


class WorkloadCalls:
    """Needs `store`, `tunnels` and `_allow(call, capability, resource)` from the service."""

    store: Store
    tunnels: TunnelHub
    _allow: Callable[..., None]  # (call, capability, resource): raises unless allowed

    def Logs(self, request: api_pb2.LogsRequest, call: Call) -> Iterator[api_pb2.LogChunk]:
        targets = workloads.resolve(self.store, _tenant(request), request.target, dict(request.tags))
        for service in sorted({t.service for t in targets}):
            self._allow(call, "service.logs", service)
        yield from workloads.stream_logs(self.tunnels, targets, request, call.context.is_active)

    def Scale(self, request: api_pb2.ScaleRequest, call: Call) -> api_pb2.Json:
        from dataclasses import asdict

        from ccattler.engine.admission.scale import scale_service

        if not request.service:
            raise BadRequest("scale needs a service name")
        assert call.principal is not None
        result = scale_service(self.store, call.principal, request.service, request.instances,
                               tenant=_tenant(request), dry_run=request.dry_run)
        return api_pb2.Json(json=json.dumps(asdict(result), default=str))

    def WhoAmI(self, request: api_pb2.Empty, call: Call) -> api_pb2.Json:
        """Who the server takes the caller for (`cca whoami`, `cca login`'s check): any caller may ask."""
        assert call.principal is not None
        p = call.principal
        return api_pb2.Json(json=json.dumps({"name": p.name, "kind": p.kind, "team": p.team,
                                             "groups": list(p.groups)}))

    def Exec(self, requests: Iterator[api_pb2.ExecInput], call: Call) -> Iterator[api_pb2.ExecOutput]:
        first = next(requests, None)
        if first is None or not first.instance or not first.command:
            raise BadRequest("exec needs an instance and a command")
        ref = parse_service(first.instance, _tenant(first))
        targets = workloads.resolve(self.store, ref.tenant, ref.full)
        if len(targets) != 1 or targets[0].instance != ref.name:
            raise BadRequest(f"{ref.full} is a service; exec needs one instance (cca get instances)")
        self._allow(call, "service.exec", targets[0].service)
        yield from workloads.relay_exec(self.tunnels, targets[0], first, requests, call.context.is_active)

    def Top(self, request: api_pb2.GetRequest, call: Call) -> api_pb2.Json:
        if request.kind == "nodes":
            self._allow(call, "node.read")
            rows = top.nodes(self.store)
        elif request.kind == "workloads":
            tenant = None if request.all_tenants else _tenant(request)
            if tenant is not None:
                self._allow(call, "service.read", f"{tenant}/*")
            access = ReadAccess(self.store, call.principal)  # -A: the tenants the caller may read
            rows = [r for r in top.workloads(self.store, tenant, dict(request.tags))
                    if access.may_read(f"{INSTANCES}{r['service']}/{r['name']}")]
        else:
            raise BadRequest(f"top shows nodes or workloads, not {request.kind!r}")
        return api_pb2.Json(json=json.dumps({"kind": request.kind, "items": rows}))

    def MetricSet(self, request: api_pb2.MetricRequest, call: Call) -> api_pb2.Json:
        ref = parse_service(request.service, _tenant(request))
        try:
            parse_service(request.name)  # a metric name is one key segment
        except CcaError as exc:
            raise BadRequest(f"metric name: {exc}") from None
        if "/" in request.name:
            raise BadRequest(f"metric name {request.name!r} must not contain '/'")
        if self.store.get(f"{DESIRED_SERVICES}{ref.tenant}/{ref.name}") is None:
            raise NotFound(f"service {ref.full} is not declared")
        self._allow(call, "service.update", ref.full)
        key = f"{METRICS}{ref.tenant}/{ref.name}/{request.name}/cli"
        revision = self.store.put(key, {"value": request.value, "time": time.time(), "source": "cli"})
        return api_pb2.Json(json=json.dumps({"key": key, "revision": revision}))

    def NodeInspect(self, request: api_pb2.GetRequest, call: Call) -> api_pb2.Json:
        self._allow(call, "node.read")
        node = request.name
        observed = self.store.get(f"{OBSERVED_NODES}{node}") if node else None
        condition = self.store.get(f"{NODE_CONDITIONS}{node}") if node else None
        if observed is None and condition is None:
            raise NotFound(f"node {node!r} is not known (cca get nodes)")
        if request.kind not in ("", DATAPLANE):
            raise BadRequest(f"node-inspect asks for the runtime, or kind {DATAPLANE!r} for its data plane "
                             f"too (not {request.kind!r})")
        session = self.tunnels.open(node, "inspect", {"dataplane": request.kind == DATAPLANE}, node)
        data, deadline = b"", time.monotonic() + INSPECT_TIMEOUT
        try:
            while True:
                try:
                    _, up = session.output.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise CcaError(f"node {node} did not answer within {INSPECT_TIMEOUT:g}s") from None
                data += up.data
                if up.closed:
                    if up.error:
                        raise CcaError(f"node {node}: {up.error}")
                    break
        finally:
            session.cancel()
        runtime = json.loads(data or b"{}")
        extra = {}
        if request.kind == DATAPLANE:
            if "dataplane" not in runtime:
                raise CcaError(f"node {node}'s agent did not report its data plane (an older agent?)")
            extra["dataplane"] = runtime.pop("dataplane")
        return api_pb2.Json(json=json.dumps({
            "node": node, "observed": observed.value if observed else None,
            "condition": condition.value if condition else None, "runtime": runtime, **extra}))
