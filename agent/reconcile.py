"""The agent's reconcile core: makes a runtime (and the node network) match the instances placed on
this node, and says what it observes.

Each `reconcile(desired)` starts what is missing, replaces what changed, stops and removes what is
no longer placed (orphans included, running or stopped), restarts what exited or failed its
startup/liveness probe with exponential backoff (the observed `reason` says why and when it
retries), rewrites rotated secret files of running instances every `secret_refresh` seconds,
reports readiness and health from the probes (`probes.Prober`), gives each container its workload
identity before it starts and rotates it while it runs (`identity.Identities`), and garbage-collects
leftovers on the first call and every `gc_interval` seconds. It returns the complete set of
`observed/instance` documents for this node. Knobs: `Backoff`, `stop_timeout`, `workers`
(parallel starts/stops).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from ccattler.agent.desired import InstanceSpec
from ccattler.agent.identity import Identities
from ccattler.agent.init_steps import InitProgress, InitRunner, owner
from ccattler.agent.net.node import NodeNetwork
from ccattler.agent.probes import Prober, Verdict, check
from ccattler.agent.runtime.base import ContainerSpec, IdentityFiles, Runtime, SecretFile
from ccattler.engine.facts import CcaError

log = logging.getLogger(__name__)

#: (secret name, plaintext, mount path) of each secret an instance is granted.
SecretValues = list[tuple[str, bytes, str]]
#: `tenant/instance` → its SecretValues (AgentClient.fetch_secrets).
SecretSource = Callable[[str], SecretValues]
#: Several at once, each → its values or its error (AgentClient.fetch_secrets_many: one call).
BatchSecretSource = Callable[[list[str]], Mapping[str, "SecretValues | CcaError"]]


class NotYet(CcaError):
    """Raised by `admit`: the instance may not start yet (say, its network policy is not decided
    on this node); not a failed start — no backoff, no restart counted."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Restart delays: `initial` doubling up to `maximum`; `reset_after` seconds up forgets failures."""

    initial: float = 1.0
    maximum: float = 30.0  # capped at 30 s: a crash loop is retried (and counted by rollouts) often enough
    reset_after: float = 60.0

    def delay(self, failures: int) -> float:
        return min(self.maximum, self.initial * 2 ** max(0, failures - 1))


@dataclass(slots=True)
class _Record:
    """What the reconciler remembers about one instance between calls."""

    restarts: int = 0
    failures: int = 0
    retry_at: float = 0.0
    reason: str | None = None
    running_since: float | None = None
    verdict: Verdict | None = None
    #: The readiness last reported, and the wall time it became that (the HPA's readiness
    #: transition: the autoscaler's cpu initialization rule reads it).
    ready: bool | None = None
    ready_since: float | None = None
    #: The init steps' progress for the current spec (None: none to run, or the main container was
    #: found already created for this spec, e.g. after an agent restart).
    init: InitProgress | None = None
    #: The spec hash whose init steps passed: restarts of that spec skip them.
    init_passed: str = ""


class Reconciler:
    """Drives `runtime` (and `network`, for runtimes with their own network namespace) on `node`.

    Call `reconcile` with the desired instances whenever the slice changes and periodically (every
    second or so: that is how crashes are noticed). Call it only once the agent has its first
    slice, since everything not in `desired` is removed.
    """

    def __init__(self, node: str, runtime: Runtime, network: NodeNetwork | None = None, *,
                 backoff: Backoff = Backoff(), stop_timeout: float = 5.0, workers: int = 8,
                 gc_interval: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 secrets: SecretSource | None = None, secret_refresh: float = 15.0,
                 secrets_many: BatchSecretSource | None = None,
                 admit: Callable[[InstanceSpec], None] | None = None,
                 identities: Identities | None = None,
                 resolv_conf: Callable[[InstanceSpec], str | None] | None = None,
                 wall: Callable[[], float] = time.time):
        if runtime.isolated_network and network is None:
            raise CcaError(f"the {runtime.kind} runtime needs the node network (NodeNetwork)")
        self.node, self.runtime, self.network = node, runtime, network
        self.backoff, self.stop_timeout, self.clock = backoff, stop_timeout, clock
        self.wall = wall  # unix time, for what the report states as times (ready_since)
        self.gc_interval = gc_interval
        self.secrets, self.secret_refresh = secrets, secret_refresh
        self.secrets_many = secrets_many  # the refresh tick's one call for all (else one per instance)
        #: Called before a process starts (network policy in the kernel first: fail closed); a
        #: CcaError is a failed start, retried with backoff; `NotYet` is no failure: the start
        #: waits (its reason shown) and is tried again on the next reconcile.
        self.admit = admit
        #: Workload identities (None, inactive, or a runtime without identity files: none).
        self.identities = identities if identities is not None and runtime.identity_files else None
        #: A container's /etc/resolv.conf (the node-local resolver's); None: the host's.
        self.resolv_conf = resolv_conf
        self._records: dict[str, _Record] = {}
        # workers=1 runs everything inline: sim nodes (hundreds per process) need no threads.
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="cca-reconcile") if workers > 1 else None
        self._lock = threading.Lock()
        self._next_gc = 0.0
        self.init_runner = InitRunner(runtime, clock)
        self._init_statuses: dict[str, Any] = {}  # the init containers as listed this tick
        # One refresh for the whole node every `secret_refresh` s (not per instance: per-instance
        # timers drift apart with start times, and one batched call would become many).
        self._next_refresh = clock() + secret_refresh
        if runtime.kind == "sim":  # simulated containers pass their probes, inline
            self.prober = Prober(lambda probe, name, ip: (True, "simulated"), clock, workers=0)
        else:
            self.prober = Prober(lambda probe, name, ip: check(runtime, probe, name, ip), clock)

    # -- the loop body -------------------------------------------------------------------------
    def reconcile(self, desired: Mapping[str, InstanceSpec]) -> dict[str, dict[str, Any]]:
        """Converge once; returns observed key → document for every desired instance."""
        with self._lock:
            now = self.clock()
            statuses = {s.name: s for s in self.runtime.list()}
            self._init_statuses = {n: s for n, s in statuses.items() if owner(n) is not None}
            for name in self._init_statuses:
                del statuses[name]
            self._remove_stray_inits(desired, statuses)
            removals = [n for n in statuses if n not in desired]
            starts: list[tuple[InstanceSpec, bool]] = []  # (spec, a leftover container to remove first)
            for name, spec in desired.items():
                record = self._records.setdefault(name, _Record())
                status = statuses.get(name)
                if status is not None and status.spec_hash == spec.spec_hash:
                    record.init_passed = spec.spec_hash  # it was started: its init steps passed
                if status is not None and status.spec_hash != spec.spec_hash:
                    removals.append(name)  # changed: replace it now, it is not a failure
                    starts.append((spec, False))
                elif status is None or status.state == "created":
                    if now >= record.retry_at:
                        starts.append((spec, status is not None))
                elif status.state == "exited":
                    self._crashed(name, status.reason or "exited", record, now)
                elif status.state == "running":
                    self._running(record, now)
                    self._probe(spec, record, now)
            self._remove(removals)
            self._each(lambda job: self._start(*job), starts)
            self._rotate_identities([spec for name, spec in desired.items() if name not in removals
                                     and name in statuses and statuses[name].state == "running"])
            if now >= self._next_refresh:
                self._next_refresh = now + self.secret_refresh
                self._refresh_all([spec for name, spec in desired.items() if spec.secrets and name in statuses
                                   and statuses[name].state == "running" and name not in removals])
            for name in set(self._records) - set(desired):
                if self._records.pop(name).init is not None:
                    self.init_runner.forget(name)
                self.prober.forget(name)
                if self.identities is not None:
                    self.identities.forget(name)
            if now >= self._next_gc:
                self.gc(desired)
                self._next_gc = now + self.gc_interval
            return self._observe(desired)

    def gc(self, desired: Mapping[str, InstanceSpec]) -> list[str]:
        """Remove runtime leftovers and network namespaces/veths of containers no longer wanted."""
        gone = self.runtime.prune()
        if self.network is not None:
            gone += self.network.gc(keep=set(desired) | {s.sandbox for s in desired.values() if s.sandbox})
        if gone:
            log.info("garbage-collected %s", ", ".join(gone))
        return gone

    def next_wakeup(self) -> float | None:
        """Seconds until the earliest pending restart, or None when nothing waits."""
        pending = [r.retry_at for r in self._records.values() if r.retry_at > 0]
        return max(0.0, min(pending) - self.clock()) if pending else None

    def remove_all(self) -> None:
        """Stop and remove every container of this runtime and their networks, and unmount volume
        images (node shutdown; volume data stays)."""
        with self._lock:
            self._remove([s.name for s in self.runtime.list()])
            self._records.clear()
            self.gc({})
            if self.runtime.volumes is not None:
                self.runtime.volumes.unmount_all()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.prober.close()

    def _each(self, action: Callable[[Any], None], items: list[Any]) -> None:
        """Run `action` on every item: in parallel on the pool when there is one and it pays."""
        if self._pool is None or len(items) < 2:
            for item in items:
                action(item)
        else:
            list(self._pool.map(action, items))

    # -- actions -------------------------------------------------------------------------------
    def _crashed(self, name: str, reason: str, record: _Record, now: float) -> None:
        try:
            self.runtime.remove(name)  # keep its network: the restart gets the same address
        except (CcaError, OSError) as exc:  # the next call sees it again and counts it then
            log.warning("removing crashed %s: %s", name, exc)
            return
        self.prober.forget(name)
        record.restarts += 1
        record.failures += 1
        record.running_since, record.verdict = None, None
        delay = self.backoff.delay(record.failures)
        record.retry_at = now + delay
        record.reason = reason
        log.info("%s %s; restarting in %.0fs", name, record.reason, delay)

    def _probe(self, spec: InstanceSpec, record: _Record, now: float) -> None:
        """Read the probes; a failed startup or liveness probe restarts the container like a crash."""
        assert record.running_since is not None
        ip = spec.ip if self.runtime.isolated_network else None
        record.verdict = self.prober.observe(spec.key, ip, spec.probes, record.running_since)
        if not record.verdict.live:
            self._crashed(spec.key, record.verdict.reason or "probe failed", record, now)

    def _running(self, record: _Record, now: float) -> None:
        if record.running_since is None:
            record.running_since = now
        elif record.failures and now - record.running_since >= self.backoff.reset_after:
            record.failures, record.reason, record.retry_at = 0, None, 0.0

    def _start(self, spec: InstanceSpec, leftover: bool) -> None:
        record = self._records[spec.key]
        if spec.waiting_for is not None:  # checked at start only: a running ordinal stays up
            record.reason = f"waiting for {spec.waiting_for} to be ready (stateful: ordered start)"
            return
        try:
            if leftover:
                self.runtime.remove(spec.key)  # created but never started: a failed start's remains
            netns = None
            if self.runtime.isolated_network:
                if spec.ip is None:
                    record.reason = "waiting for an address from the network controller"
                    return
                assert self.network is not None
                # a member of a `share network` group joins its seat's namespace (agent/sandboxes.py)
                netns = self.network.attach(spec.sandbox or spec.key, spec.ip).netns_path
            if self.admit is not None:
                try:
                    self.admit(spec)
                except NotYet as exc:
                    record.reason = str(exc)
                    return
            identity = self._identity(spec)  # before anything runs: no identity, no start
            if not self._init_passed(spec, record, lambda: self._container(spec, netns, identity)):
                return
            self.runtime.create(self._container(spec, netns, identity))
            self.runtime.start(spec.key)
            record.retry_at = 0.0
            if record.failures == 0:
                record.reason = None
        except (CcaError, OSError) as exc:
            record.failures += 1
            record.restarts += 1  # a failed start is a failure too: rollouts count them (engine/rollout)
            delay = self.backoff.delay(record.failures)
            record.retry_at = self.clock() + delay
            record.reason = f"start failed: {exc}"
            log.warning("%s: %s; retrying in %.0fs", spec.key, record.reason, delay)
            try:
                self.runtime.remove(spec.key)
            except (CcaError, OSError):
                log.exception("cleaning up after a failed start of %s", spec.key)

    def _container(self, spec: InstanceSpec, netns: str | None,
                   identity: IdentityFiles | None) -> ContainerSpec:
        container = spec.container(netns, self._secret_files(spec), identity)
        resolv = self.resolv_conf(spec) if self.resolv_conf is not None else None
        return replace(container, resolv_conf=resolv) if resolv else container

    def _init_passed(self, spec: InstanceSpec, record: _Record, container: Callable[[], Any]) -> bool:
        """Advance the instance's init steps (agent/init_steps); True when the main container may
        start (no steps, or all passed for this spec)."""
        if not spec.init or record.init_passed == spec.spec_hash:
            return True
        if record.init is None or record.init.spec_hash != spec.spec_hash:  # first, or a replacement
            if record.init is not None:
                self.init_runner.forget(spec.key)
            record.init = InitProgress(spec.spec_hash, len(spec.init))
        progress = record.init
        if self.init_runner.advance(spec.init, progress, spec.key, container, self._init_statuses):
            record.init_passed = spec.spec_hash
            return True
        record.reason = progress.reason(spec.init, self.clock())
        return False

    def _remove_stray_inits(self, desired: Mapping[str, InstanceSpec], mains: Mapping[str, Any]) -> None:
        """Init containers of instances gone, replaced or already started are removed."""
        for name, status in list(self._init_statuses.items()):
            key = owner(name)
            spec = desired.get(key or "")
            if spec is None or status.spec_hash != spec.spec_hash or key in mains:
                try:
                    self.runtime.remove(name)
                except (CcaError, OSError) as exc:
                    log.warning("removing init container %s: %s", name, exc)
                del self._init_statuses[name]

    def _identity(self, spec: InstanceSpec) -> IdentityFiles | None:
        if self.identities is None or not self.identities.active:
            return None
        return self.identities.for_start(spec)

    def _rotate_identities(self, running: list[InstanceSpec]) -> None:
        """Rotate the identities that reached 2/3 of their life (in place, in the container)."""
        if self.identities is None or not self.identities.active:
            return
        identities, runtime = self.identities, self.runtime

        def rotate(spec: InstanceSpec) -> None:
            identities.rotate(spec, lambda files: runtime.rotate_identity(spec.key, files))

        self._each(rotate, identities.due(running))

    def _secret_files(self, spec: InstanceSpec) -> tuple[SecretFile, ...]:
        """The plaintexts of the instance's secrets, fetched just before it starts."""
        if not spec.secrets:
            return ()
        if self.secrets is None:
            raise CcaError(f"{spec.key} needs secrets and this node has no way to fetch them")
        return _files(self.secrets(spec.key))

    def _refresh_all(self, specs: list[InstanceSpec]) -> None:
        """Fetch the secrets of `specs` again (one call for all with `secrets_many`) and rewrite
        the files whose value was rotated."""
        if self.secrets_many is None or not specs:
            self._each(self._refresh_secrets, specs)
            return
        try:
            fetched = self.secrets_many([spec.key for spec in specs])
        except (CcaError, OSError) as exc:  # the next period tries again
            log.warning("refreshing the secrets of %d instance(s): %s", len(specs), exc)
            return
        jobs = [(spec, fetched.get(spec.key, CcaError("the server did not answer for it"))) for spec in specs]
        self._each(lambda job: self._rewrite_secrets(*job), jobs)

    def _refresh_secrets(self, spec: InstanceSpec) -> None:
        try:
            if self.secrets is None:
                raise CcaError("this node has no way to fetch secrets")
            values: SecretValues | CcaError = self.secrets(spec.key)
        except (CcaError, OSError) as exc:
            values = exc if isinstance(exc, CcaError) else CcaError(str(exc))
        self._rewrite_secrets(spec, values)

    def _rewrite_secrets(self, spec: InstanceSpec, values: SecretValues | CcaError) -> None:
        """Overwrite the instance's secret files whose value was rotated (the next period retries)."""
        if isinstance(values, CcaError):
            log.warning("refreshing the secrets of %s: %s", spec.key, values)
            return
        try:
            changed = self.runtime.refresh_secrets(spec.key, _files(values))
        except (CcaError, OSError) as exc:
            log.warning("refreshing the secrets of %s: %s", spec.key, exc)
            return
        if changed:
            log.info("%s: %d rotated secret file(s) rewritten", spec.key, changed)

    def _remove(self, names: list[str]) -> None:
        """Stop all of `names` within one grace period, then remove them and their networks."""
        if not names:
            return
        for name, error in self.runtime.stop_many(names, timeout=self.stop_timeout).items():
            log.warning("stopping %s: %s (removing anyway)", name, error)
        self._each(self._discard, names)

    def _discard(self, name: str) -> None:
        try:
            self.runtime.remove(name)
            if self.network is not None:
                self.network.detach(name)
        except (CcaError, OSError) as exc:  # the next call (or the GC timer) tries again
            log.warning("removing %s: %s", name, exc)

    # -- observation ---------------------------------------------------------------------------
    def _observe(self, desired: Mapping[str, InstanceSpec]) -> dict[str, dict[str, Any]]:
        statuses = {s.name: s for s in self.runtime.list()}
        now = self.clock()
        observed = {}
        for name, spec in desired.items():
            record = self._records[name]
            status = statuses.get(name)
            reason = record.reason
            # Not probed yet (started during this call): not ready while a readiness or startup probe
            # has still to pass, or it would flicker into endpoints for a tick.
            verdict = record.verdict or Verdict(ready=not any(p.kind in ("readiness", "startup")
                                                              for p in spec.probes))
            init = record.init if record.init and record.init.spec_hash == spec.spec_hash else None
            if status is not None and status.state == "running" and status.spec_hash == spec.spec_hash:
                state, reason = "running", None
            elif status is not None and status.state in ("created", "starting"):
                state = "starting"
            elif init is not None and init.failed is not None:
                state = "failed"
            elif init is not None and not init.done:
                state = "starting"
            elif record.retry_at > now:
                state = "failed"
                reason = f"{record.reason}; retrying in {record.retry_at - now:.0f}s"
            else:
                state = "pending"
            ready = state == "running" and verdict.ready
            if record.ready != ready:
                record.ready, record.ready_since = ready, self.wall()
            observed[spec.observed_key] = {
                "node": self.node, "state": state,
                "ip": spec.ip if self.runtime.isolated_network else None,
                "restarts": record.restarts, "reason": reason,
                "health": verdict.health if state == "running" else None,
                "ready": ready,
            }
            if state == "running":  # when it started, when its readiness last changed (unix s)
                observed[spec.observed_key].update(started=status.started_at, ready_since=record.ready_since)
            if init is not None:
                observed[spec.observed_key]["init"] = init.document()
            if self.identities is not None and self.identities.active:
                observed[spec.observed_key]["identity"] = self.identities.document(name)
        return observed


def _files(values: SecretValues) -> tuple[SecretFile, ...]:
    """Secret files at their mount paths (default `/run/secrets/<name>`)."""
    return tuple(SecretFile(mount or f"/run/secrets/{name.rsplit('/', 1)[-1]}", value)
                 for name, value, mount in values)
