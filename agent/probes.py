"""Health probes (startup, liveness, readiness) of running instances, with Kubernetes' semantics:
a startup probe holds the others back until it passes; `failure_threshold` failures in a row of
startup or liveness mean restart; readiness needs `success_threshold` successes in a row (a service
without one is ready when running). Probes run on a small thread pool and never block a tick.

Knob: `workers` (0 runs checks inline: the sim runtime's checks are instant).
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ccattler.agent.runtime.base import Runtime
from ccattler.engine.facts import CcaError, service_doc

KINDS = ("startup", "liveness", "readiness")
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe of a service (docs/facts.md `probes.<kind>`), times in seconds."""

    kind: str
    type: str
    port: int | None = None
    path: str = "/"
    command: str | None = None
    every: float = 10.0
    timeout: float = 1.0
    failure_threshold: int = 3
    success_threshold: int = 1
    initial_delay: float = 0.0


def probes_of(service: Mapping[str, Any]) -> tuple[Probe, ...]:
    """The probes a service document declares."""
    found = []
    for kind in KINDS:
        doc = service_doc.probes(service).get(kind)
        if not doc:
            continue
        found.append(Probe(kind=kind, type=doc["type"], port=doc.get("port"), path=doc.get("path") or "/",
                           command=doc.get("command"), every=(doc.get("every") or 10000) / 1000,
                           timeout=(doc.get("timeout") or 1000) / 1000,
                           failure_threshold=doc.get("failure_threshold") or 3,
                           success_threshold=doc.get("success_threshold") or 1,
                           initial_delay=(doc.get("initial_delay") or 0) / 1000))
    return tuple(found)


def check(runtime: Runtime, probe: Probe, name: str, ip: str | None) -> tuple[bool, str]:
    """Run one probe against container `name` at `ip` (the host for runtimes without their own)."""
    host = ip or "127.0.0.1"
    try:
        if probe.type == "http":
            with _DIRECT.open(f"http://{host}:{probe.port}{probe.path}", timeout=probe.timeout) as response:
                return 200 <= response.status < 400, f"HTTP {response.status}"
        if probe.type == "tcp":
            with socket.create_connection((host, probe.port or 0), timeout=probe.timeout):
                return True, "connected"
        result = runtime.exec(name, ["/bin/sh", "-c", probe.command or "true"], timeout=probe.timeout)
        return result.exit_code == 0, f"exit code {result.exit_code}"
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}"
    except (OSError, CcaError) as exc:
        return False, str(getattr(exc, "reason", exc))


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the probes say about one running instance now."""

    live: bool = True
    ready: bool = True
    health: str | None = None
    reason: str | None = None


@dataclass(slots=True)
class _Track:
    due: float
    successes: int = 0
    failures: int = 0
    passed: bool = False
    message: str = ""
    pending: Future[tuple[bool, str]] | None = None


@dataclass(slots=True)
class _Instance:
    since: float
    tracks: dict[str, _Track] = field(default_factory=dict)


class Prober:
    """Keeps probe state per instance; `observe` submits due checks and reads finished ones."""

    def __init__(self, checker: Callable[[Probe, str, str | None], tuple[bool, str]],
                 clock: Callable[[], float] = time.monotonic, workers: int = 4):
        self.checker, self.clock = checker, clock
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="cca-probe") if workers > 0 else None
        self._instances: dict[str, _Instance] = {}

    def observe(self, name: str, ip: str | None, probes: tuple[Probe, ...], since: float) -> Verdict:
        """The verdict for `name`, running since `since` (a new `since` starts its probes over)."""
        if not probes:
            return Verdict()
        state = self._instances.get(name)
        if state is None or state.since != since:
            state = self._instances[name] = _Instance(since, {p.kind: _Track(since + p.initial_delay)
                                                              for p in probes})
        by_kind = {p.kind: p for p in probes}
        startup = by_kind.get("startup")
        started = startup is None or state.tracks["startup"].passed
        for probe in probes:
            if probe.kind == "startup" and started or probe.kind != "startup" and not started:
                continue
            self._advance(probe, state.tracks[probe.kind], name, ip)
        return self._verdict(by_kind, state, started)

    def forget(self, name: str) -> None:
        self._instances.pop(name, None)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _advance(self, probe: Probe, track: _Track, name: str, ip: str | None) -> None:
        if track.pending is not None and track.pending.done():
            ok, track.message = track.pending.result()
            track.pending = None
            track.successes, track.failures = (track.successes + 1, 0) if ok else (0, track.failures + 1)
            if track.successes >= probe.success_threshold:
                track.passed = True
            elif track.failures >= probe.failure_threshold:
                track.passed = False
        now = self.clock()
        if track.pending is None and now >= track.due:
            track.due = now + probe.every
            if self._pool is None:
                track.pending = Future()
                track.pending.set_result(self.checker(probe, name, ip))
                self._advance(probe, track, name, ip)  # inline: count it now
            else:
                track.pending = self._pool.submit(self.checker, probe, name, ip)

    @staticmethod
    def _verdict(by_kind: dict[str, Probe], state: _Instance, started: bool) -> Verdict:
        for kind in ("startup", "liveness"):
            probe, track = by_kind.get(kind), state.tracks.get(kind)
            if probe and track and track.failures >= probe.failure_threshold:
                return Verdict(live=False, ready=False, health="unhealthy",
                               reason=f"{kind} probe failed {track.failures} times: {track.message}")
        liveness = state.tracks.get("liveness")
        health = None
        if liveness is not None:
            health = "unhealthy" if liveness.failures else ("healthy" if liveness.successes else None)
        readiness = state.tracks.get("readiness")
        ready = started and (readiness is None or readiness.passed)
        return Verdict(live=True, ready=ready, health=health)
