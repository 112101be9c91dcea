"""One node's machinery below the API connection: the runtime, the image store, the node network
and the reconciler, driven by the node's slice of facts. The agent process is a loop on top:
feed `apply(slice)` the facts it watches, report what it returns.

Knobs: the runtime kind (`runc` when root and runc are present, else `process`; `sim`), the state
dir (`agent.paths.default_state_dir`), the bridge name, the reconciler's backoff, and `dns_port`
(the node-local resolver on the bridge's gateway, agent/dns/; None: no resolver, containers get the
host's resolv.conf).
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ccattler.agent.dataplane.base import DataPlane, DataPlaneState
from ccattler.agent.dataplane.factory import check_kind, make_dataplane
from ccattler.agent.dataplane.policy_state import decided
from ccattler.agent.dataplane.state import StateBuilder, keys_under
from ccattler.agent.desired import InstanceSpec, declared_volumes, desired_instances, node_subnet
from ccattler.agent.dns.resolv import container_resolv_conf
from ccattler.agent.dns.server import Resolver, ResolverError
from ccattler.agent.gates.model import gates_from_slice
from ccattler.agent.identity import Identities
from ccattler.agent.net.node import NodeNetwork
from ccattler.agent.net.overlay import Overlay, peers_from_slice
from ccattler.agent.reconcile import (
    Backoff,
    BatchSecretSource,
    NotYet,
    Reconciler,
    SecretSource,
    SecretValues,
)
from ccattler.agent.runtime.base import Runtime
from ccattler.agent.sandboxes import Sandboxes
from ccattler.agent.service_metrics import (
    ConnectionLoad,
    Recent,
    ServiceMetrics,
    connection_totals,
    counted_vips,
)
from ccattler.agent.telemetry import Telemetry
from ccattler.engine.facts import CcaError
from ccattler.engine.facts.keys import DNS, FIREWALL

RPS = "requests_per_second"
#: How often the gates' and the data plane's counters are read by default (`cca agent
#: --metric-interval`; the autoscaler's sample period is 15 s, so at most `MAX_METRIC_INTERVAL`).
LOAD_PERIOD = 10.0
MAX_METRIC_INTERVAL = 15.0
log = logging.getLogger(__name__)


def check_metric_interval(seconds: float) -> float:
    """A load-sampling interval the autoscaler can use: its samples go stale after three of its
    15 s sample periods, so a slower node would look idle between samples."""
    if not 0 < seconds <= MAX_METRIC_INTERVAL:
        raise CcaError(f"metric interval {seconds:g}s: expected more than 0 and at most "
                       f"{MAX_METRIC_INTERVAL:g}s (the autoscaler counts a sample older than 45 s "
                       "as missing)")
    return seconds


def metric_refresh(interval: float) -> float:
    """How old a steady sample may get before it is rewritten: 30 s at the default 10 s interval,
    three intervals when they are shorter (a short interval is asked for to react fast, and a
    rewrite is what lets the autoscaler decide again once a stabilization window has passed)."""
    return min(30.0, 3 * interval)


class NodeCore:
    """Runtime + images + network + reconciler for node `node`."""

    def __init__(self, node: str, runtime: Runtime, *, state_dir: Path | None = None,
                 bridge: str = "cca0", backoff: Backoff = Backoff(), stop_timeout: float = 5.0,
                 no_masquerade: tuple[str, ...] = (), overlay: Overlay | None = None,
                 dataplane: str = "nftables", node_addresses: tuple[str, ...] = (),
                 dns_port: int | None = 53, metric_interval: float = LOAD_PERIOD):
        self.node, self.runtime, self.bridge = node, runtime, bridge
        #: The node-local resolver (isolated runtimes: on the bridge's gateway), made with the network.
        self.dns_port = dns_port
        self.dns: Resolver | None = None
        self._dns_seen: dict[str, Any] | None = None  # the dns documents the resolver serves
        self._dns_error: str | None = None
        #: Which data plane programs VIPs and policy (`make_dataplane`); made with the node network.
        self.dataplane_kind = check_kind(dataplane)
        self.dataplane: DataPlane | None = None
        self.node_addresses = node_addresses
        self._dataplane_lock = threading.Lock()  # apply (loop) vs admit (reconciler workers)
        self._dataplane_wanted: DataPlaneState | None = None   # built from the last slice
        self._dataplane_builder = StateBuilder()  # keeps unchanged services' rows between builds
        self._dataplane_applied: DataPlaneState | None = None  # what the plane last took
        #: (this node's firewall document, the identities it decides: `policy_state.decided`)
        self._decided: tuple[Any, frozenset[str]] = (None, frozenset())
        self._service_route: str | None = None
        self._dataplane_error: str | None = None
        #: The VXLAN overlay to the other nodes (isolated runtimes only); None: single node.
        self.overlay = overlay
        self.state_dir = state_dir
        self.backoff, self.stop_timeout, self.no_masquerade = backoff, stop_timeout, no_masquerade
        self.network: NodeNetwork | None = None
        self.reconciler: Reconciler | None = None
        #: Where secret plaintexts come from (`AgentClient.fetch_secrets`; see `connect`).
        self.secret_source: SecretSource | None = None
        #: The same for many instances in one call (`AgentClient.fetch_secrets_many`): the refresh
        #: tick's. Without it the tick asks `secret_source` once per instance.
        self.secret_batch_source: BatchSecretSource | None = None
        #: Workload identities; active once given a source (`AgentClient.issue_identity`).
        self.identities = Identities()
        #: Usage sampling (every 10 s; published on meaningful change or every 60 s).
        self.telemetry = Telemetry(runtime)
        #: The node's HAProxy for gates (agent/gates/), made on the first apply that needs one.
        self.gates: Any = None
        #: Requests/s through those gates per target service, as autoscaler samples.
        self.metric_interval = check_metric_interval(metric_interval)
        self.load = ServiceMetrics(node, refresh=metric_refresh(metric_interval))
        self.connections = ConnectionLoad()
        self.gate_load = Recent()  # a gate's zeros only while it served the service lately
        self._next_load = 0.0
        #: Seats of `share network` service groups on this node (agent/sandboxes.py).
        self.sandboxes = Sandboxes(runtime.kind, state_dir)
        if not runtime.isolated_network:
            self.reconciler = self._reconciler(None)

    def connect(self, client: Any) -> None:
        """Take secrets and workload identities from `client` (an `AgentClient`): the agent loop
        calls it when it starts, and again when it carries on over a renewed certificate's
        connection."""
        self.secret_source = getattr(client, "fetch_secrets", None)
        self.secret_batch_source = getattr(client, "fetch_secrets_many", None)
        self.identities.source = getattr(client, "issue_identity", None)

    def apply(self, facts: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Converge on the slice `facts`; returns every observed instance document of this node.

        Call it with the first complete slice (everything else on the node is removed), then on
        every change and every second or so (to notice crashes and run restarts).
        """
        desired = desired_instances(facts, self.node)
        if not self.runtime.isolated_network:
            # No own address (process, sim): one arriving later must not replace a running
            # container (its address is part of the spec hash), which made ready instances restart.
            desired = {k: replace(spec, ip=None) if spec.ip else spec for k, spec in desired.items()}
        if self.runtime.isolated_network:
            subnet = node_subnet(facts, self.node)
            if subnet is None:
                return {spec.observed_key: _pending(self.node, spec.ip, "waiting for the node's subnet")
                        for spec in desired.values()}
            self._ensure_network(subnet)
            self._sync_dns(facts)
            self._sync_overlay(facts, subnet)
            self._sync_dataplane(facts)
        assert self.reconciler is not None
        arranged = self.sandboxes.arrange(desired, facts, self.network)  # share-network groups
        observed = self.reconciler.reconcile(arranged.run)
        for key, (state, reason) in arranged.held.items():
            spec = desired[key]
            observed[spec.observed_key] = {**_pending(self.node, None, reason), "state": state}
        desired = {**desired, **arranged.run}  # seat members carry their seat's address
        self.telemetry.sample(spec.key for spec in desired.values()
                              if observed[spec.observed_key]["state"] == "running")
        for spec in desired.values():
            observed[spec.observed_key]["usage"] = self.telemetry.usage(spec.key)
        self._volumes(facts, desired, observed)
        self._sync_gates(facts)
        observed.update(self._measured_load(facts))
        return observed

    def sync_services(self, facts: Mapping[str, Any]) -> None:
        """Only what VIP and endpoint documents drive — the data plane and the gates — without a
        whole reconcile (the agent loop calls it as soon as those change; `apply` does it too).
        Nothing before the node network exists (the first `apply` makes it)."""
        if self.runtime.isolated_network and self.network is not None:
            self._sync_dataplane(facts)
            self._sync_gates(facts)

    def _volumes(self, facts: Mapping[str, Any], desired: Mapping[str, InstanceSpec],
                 observed: dict[str, dict[str, Any]]) -> None:
        """Delete the `persistent false` volumes no desired instance uses any more (once no other
        container is left that could hold one); report each instance's volume usage."""
        volumes = self.runtime.volumes
        for spec in desired.values():
            observed[spec.observed_key]["volumes"] = volumes.report(spec.volumes) if volumes else []
        if volumes is None:
            return

        def idle() -> bool:
            return all(s.name in desired and s.spec_hash == desired[s.name].spec_hash
                       for s in self.runtime.list())

        in_use = {volume.key for spec in desired.values() for volume in spec.volumes}
        volumes.collect(in_use, declared_volumes(facts), idle)

    def shutdown(self, remove: bool = False) -> None:
        """Stop reconciling and resolving; with `remove`, also remove every container and the node
        network."""
        self._stop_dns()
        if self.reconciler is not None:
            if remove:
                self.reconciler.remove_all()
            self.reconciler.close()
        if self.network is not None:
            if remove:
                self.network.teardown()
            self.network.close()
        if self.overlay is not None and remove:
            self.overlay.remove()
        if self.gates is not None and remove:
            self.gates.stop()
        if self.dataplane is not None and remove:
            self.dataplane.teardown()
        remove_cgroup = getattr(self.runtime, "remove_node_cgroup", None)
        if remove and remove_cgroup is not None:  # runc: the node cgroups its containers were in
            left = remove_cgroup()
            if left:
                log.warning("node %s: cgroups still in use, not removed: %s", self.node, ", ".join(left))

    def _sync_dns(self, facts: Mapping[str, Any]) -> None:
        """The resolver serves the slice's `derived/dns` documents; it is (re)started on the
        gateway when missing — a failure (port 53 taken) is logged once and retried on every apply,
        and containers started meanwhile get the host's resolv.conf."""
        if self.dns_port is None or self.network is None:
            return
        if self.dns is None:
            try:
                self.dns = Resolver(self.network.gateway, self.dns_port)
                self._dns_seen, self._dns_error = None, None
                log.info("DNS: resolver on %s:%d", self.network.gateway, self.dns.port)
            except ResolverError as exc:
                if str(exc) != self._dns_error:
                    log.warning("%s (retried on every apply)", exc)
                self._dns_error = str(exc)
                return
        raw = getattr(facts, "raw", {})  # unchanged documents are the same text: cheap to compare
        seen = {key: raw[key] if key in raw else facts.get(key) for key in keys_under(facts, DNS)}
        if self._dns_seen is None:
            self.dns.update({key: facts.get(key) for key in seen})
        elif seen != self._dns_seen:  # only the changed documents are redone (Zone.updated)
            before = self._dns_seen
            changed = [k for k in seen if before.get(k) != seen[k]] + [k for k in before if k not in seen]
            self.dns.change({key: facts.get(key) for key in changed})
        self._dns_seen = seen

    def _stop_dns(self) -> None:
        if self.dns is not None:
            self.dns.stop()
            self.dns = None

    def _resolv_conf(self, spec: InstanceSpec) -> str | None:
        """A container's resolv.conf: the node's resolver while it runs (else the host's)."""
        if self.dns is None or self.network is None:
            return None
        return container_resolv_conf(self.network.gateway, spec.tenant)

    def _sync_gates(self, facts: Mapping[str, Any]) -> None:
        """The node's HAProxy follows the gates and their backends (agent/gates/); a node without
        a state dir or an own network (process/sim runtimes: no instance addresses) has none.
        Failures are logged inside and retried on the next apply."""
        if self.state_dir is None or not self.runtime.isolated_network:
            return
        if self.gates is None:
            from ccattler.agent.gates.manager import Gates

            self.gates = Gates(self.node, self.state_dir)
        self.gates.sync(facts)

    def _measured_load(self, facts: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Every `metric_interval` seconds, requests/s per service as autoscaler samples
        (`observed/metric/<t>/<svc>/requests_per_second/<node>`, agent/service_metrics.py): HTTP
        requests through this node's gates for the services they serve, new connections from this
        node to the VIP for the other services scaled on requests/s."""
        now = time.time()
        if now < self._next_load or (self.gates is None and self.dataplane is None):
            return self.load.documents()
        self._next_load = now + self.metric_interval
        values: dict[tuple[str, str], tuple[float, str]] = {}
        unread: set[str] = set()
        gated: set[str] = set()
        if self.gates is not None:
            gated = {gate.target for gate in gates_from_slice(facts)[0]}
            rates = self.gates.request_rates(now)
            if rates is None:  # HAProxy not answering: its last samples stay and go stale
                unread.add("gate")
            rates = self.gate_load.keep(rates, now) if rates is not None else None
            values.update({(svc, RPS): (rate, "gate") for svc, rate in (rates or {}).items()})
        read_counters = getattr(self.dataplane, "connection_counters", None)  # the memory plane: none
        counted = counted_vips(facts, gated)
        if read_counters is not None and counted:  # listing the counters costs: only when asked
            try:
                counters = read_counters()
            except (CcaError, OSError, ValueError) as exc:
                log.warning("node %s: data-plane counters: %s", self.node, exc)
                unread.add("dataplane")
            else:
                totals = connection_totals(counted, counters)
                values.update({(svc, RPS): (rate, "dataplane")
                               for svc, rate in self.connections.sample(totals, now).items()})
        self.load.update(values, now, frozenset(unread))
        return self.load.documents()

    def _sync_overlay(self, facts: Mapping[str, Any], subnet: str) -> None:
        """Peers' entries follow the slice; a failure is logged and retried on the next apply
        (local containers keep running meanwhile)."""
        if self.overlay is None:
            return
        try:
            peers = peers_from_slice(facts, self.node)
            if self.overlay.subnet is None and not peers:
                return  # a single node makes no device (its VNI/port stay free for others)
            if self.overlay.subnet != subnet:
                self.overlay.ensure(subnet)
            removed, added = self.overlay.sync(peers)
            if removed or added:
                log.info("overlay: peers removed %s, added %s", removed, added)
        except CcaError as exc:
            log.warning("overlay: %s", exc)

    def _sync_dataplane(self, facts: Mapping[str, Any]) -> None:
        """VIPs, external ports and policy follow the slice: the plane is applied only when the
        state built from the slice changed; a failure is logged and retried on the next apply (the
        agent and its containers carry on). The service range is routed into the bridge so
        node-originated connections to VIPs reach the DNAT."""
        wanted = self._dataplane_builder.build(facts, self.node)
        firewall = facts.get(FIREWALL + self.node)
        if firewall is not self._decided[0]:
            self._decided = (firewall, decided(firewall))
        self._dataplane_wanted = wanted
        try:
            if self.dataplane is None:
                self.dataplane = self._make_dataplane()
                log.info("data plane: %s", self.dataplane.name)
            self._route_services(facts)
            if wanted is not self._dataplane_applied:  # the builder returns the same state when unchanged
                with self._dataplane_lock:
                    self._dataplane_applied = None  # until it succeeds: admissions wait (fail closed)
                    self.dataplane.apply(wanted)
                    self._dataplane_applied = wanted
        except Exception as exc:  # noqa: BLE001 (nft, bpf() and ip fail in many ways: never crash)
            if str(exc) != self._dataplane_error:  # once per distinct failure, not every second
                log.warning("data plane %s: %s (retried on every apply)", self.dataplane_kind, exc)
            self._dataplane_error = str(exc)
        else:
            self._dataplane_error = None

    def inspect_dataplane(self) -> dict[str, Any]:
        """What this node's kernel enforces, read back now (`cca node-inspect NODE --dataplane`)."""
        from ccattler.agent.dataplane.inspect import report

        if not self.runtime.isolated_network:
            return report(None, self.dataplane_kind, note=f"the {self.runtime.kind} runtime gives instances "
                          "no network of their own: no data plane is programmed on this node")
        with self._dataplane_lock:  # not while an apply is half sent
            if self.dataplane is None:
                return report(None, self.dataplane_kind, self._dataplane_error,
                              note="the data plane is made with the node network (no subnet yet?)")
            try:
                return report(self.dataplane, self.dataplane_kind, self._dataplane_error)
            except Exception as exc:  # noqa: BLE001 (nft and bpf() fail in many ways: say so, never hang)
                return report(None, self.dataplane_kind, self._dataplane_error,
                              note=f"reading the {self.dataplane.name} data plane back failed: {exc}")

    def _make_dataplane(self) -> DataPlane:
        assert self.network is not None
        return make_dataplane(self.dataplane_kind, self.node, bridge=self.bridge,
                              gateway=self.network.gateway, node_addresses=self.node_addresses,
                              state_dir=self.state_dir,
                              cgroup=getattr(self.runtime, "node_cgroup", None))

    def _route_services(self, facts: Mapping[str, Any]) -> None:
        cidr = self._dataplane_builder.range  # what the VIP documents of the last build carry
        if cidr and cidr != self._service_route:
            subprocess.run(["ip", "route", "replace", str(cidr), "dev", self.bridge], check=True,
                           capture_output=True, text=True)
            self._service_route = cidr

    def _admit(self, spec: InstanceSpec) -> None:
        """Fail closed (the reconciler calls this before it starts a process): an instance with an
        address starts only once this node's firewall document decides its identity — open
        (nothing to do) or guarded, and then only once its address is under that policy in the
        kernel. The network controller commits an address before the network-policy controller
        (which runs after it) has written the document, so an identity the document does not
        name yet waits (`NotYet`: no failure, tried again on the next apply)."""
        identity = spec.service  # "tenant/service": the identity policy names
        wanted = self._dataplane_wanted
        if wanted is None or spec.ip is None:
            return  # no own network (process, sim runtimes): nothing to enforce
        if identity not in wanted.policies:
            if identity in self._decided[1]:
                return  # open on this node, as its firewall document says
            raise NotYet(f"waiting for network policy: {FIREWALL}{self.node} does not decide {identity} "
                         "yet (fail closed)")
        with self._dataplane_lock:
            if self.dataplane is None or self._dataplane_applied != wanted:
                raise CcaError(f"network policy of {identity} is not in the kernel yet (fail closed)")
            self.dataplane.admit(identity, spec.ip)

    def _ensure_network(self, subnet: str) -> None:
        if self.network is not None and str(self.network.subnet) == subnet:
            return
        if self.network is not None:  # the subnet moved (rare): start over on the new one
            assert self.reconciler is not None
            self._stop_dns()
            self.reconciler.remove_all()
            self.reconciler.close()
            self.network.teardown()
            self.network.close()
        if self.state_dir is None:
            raise CcaError("a node with an isolated runtime needs a state dir for its network records")
        self.network = NodeNetwork(subnet, self.state_dir, self.bridge, self.no_masquerade)
        self.network.setup()
        self.reconciler = self._reconciler(self.network)

    def _reconciler(self, network: NodeNetwork | None) -> Reconciler:
        workers = 1 if self.runtime.kind == "sim" else 8  # sim operations are instant: no threads
        return Reconciler(self.node, self.runtime, network, backoff=self.backoff,
                          stop_timeout=self.stop_timeout, workers=workers, secrets=self._fetch_secrets,
                          secrets_many=self._fetch_secrets_many, admit=self._admit,
                          identities=self.identities, resolv_conf=self._resolv_conf)

    def _fetch_secrets(self, instance: str) -> list[tuple[str, bytes, str]]:
        if self.secret_source is None:
            raise CcaError(f"{instance} needs secrets and this node has no secret source")
        return self.secret_source(instance)

    def _fetch_secrets_many(self, instances: list[str]) -> Mapping[str, SecretValues | CcaError]:
        if self.secret_batch_source is not None:
            return self.secret_batch_source(instances)
        fetched: dict[str, SecretValues | CcaError] = {}  # a source without batches: one call each
        for instance in instances:
            try:
                fetched[instance] = self._fetch_secrets(instance)
            except CcaError as exc:
                fetched[instance] = exc
        return fetched


def _pending(node: str, ip: str | None, reason: str) -> dict[str, Any]:
    return {"node": node, "state": "pending", "ip": ip, "restarts": 0, "reason": reason, "health": None,
            "ready": False, "usage": None, "volumes": []}
