"""Init steps: a service's `init { exec "…" timeout 30s retry 3 }` blocks, run in order, each to
completion, before the instance's main container starts.

Each step is a container of its own (`tenant/instance/init-<i>`) made from the instance's own
`ContainerSpec` with the step's command: the same image, network namespace (the runc runtime joins
the namespace the reconciler attached, so the step has the instance's address), volumes, config
files, env and secrets. A failing step is retried after 1, 2, 4… s (capped at `MAX_DELAY`) up to
`retry` times; then the instance is failed with the step, its exit code and the tail of its
output. Steps advance one tick at a time (never blocking the reconcile loop); their output is
appended to the instance's init log (`Runtime.init_log_path`, `cca logs --init`).

Init steps run once per spec: a restart of the main container does not run them again, a
replacement (a new spec hash) does. The sim runtime passes them at once (it runs no commands).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ccattler.agent.runtime.base import ContainerSpec, ContainerStatus, Runtime
from ccattler.engine.facts import CcaError, service_doc

log = logging.getLogger(__name__)

#: Backoff between attempts of a failing step never grows past this (seconds).
MAX_DELAY = 10.0
#: A step without `timeout` may run this long (seconds).
DEFAULT_TIMEOUT = 600.0
#: How much of a failed step's output the observed document carries.
TAIL_BYTES = 600


@dataclass(frozen=True, slots=True)
class InitStep:
    exec: str
    timeout: float = DEFAULT_TIMEOUT
    retry: int = 0


def init_steps(service: Mapping[str, Any]) -> tuple[InitStep, ...]:
    """The `init` list of a `desired/service` document (timeouts in milliseconds there)."""
    return tuple(InitStep(str(s["exec"]), (s.get("timeout") or DEFAULT_TIMEOUT * 1000) / 1000,
                          int(s.get("retry") or 0))
                 for s in service_doc.init(service) if s.get("exec"))


def container_name(key: str, index: int) -> str:
    return f"{key}/init-{index}"


def owner(name: str) -> str | None:
    """`tenant/instance` of an init container's name, None for a main container."""
    tenant, _, rest = name.partition("/")
    instance, _, step = rest.partition("/")
    return f"{tenant}/{instance}" if step.startswith("init-") else None


@dataclass(slots=True)
class InitProgress:
    """Where one instance is in its init steps (for one spec hash)."""

    spec_hash: str
    total: int
    step: int = 0  # index of the step running or next to run; == total when all passed
    attempt: int = 0  # failed attempts of the current step
    started: float | None = None
    retry_at: float = 0.0
    #: Set when a step failed for good: {"step", "exec", "exit_code", "attempts", "output"}.
    failed: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        return self.step >= self.total

    def reason(self, steps: tuple[InitStep, ...], now: float) -> str:
        if self.failed:
            f = self.failed
            code = "timed out" if f["exit_code"] is None else f"exit code {f['exit_code']}"
            tail = f["output"].strip().splitlines()[-1:] or [""]
            return (f"init step {f['step']}/{self.total} ({f['exec']!r}) failed: {code} after "
                    f"{f['attempts']} attempt(s){': ' + tail[0] if tail[0] else ''}")
        step = f"init step {self.step + 1}/{self.total} ({steps[self.step].exec!r})"
        if self.retry_at > now:
            return f"{step} failed {self.attempt} time(s); retrying in {self.retry_at - now:.0f}s"
        return f"running {step}"

    def document(self) -> dict[str, Any]:
        """The observed instance's `init` field."""
        return {"steps": self.total, "passed": self.step, "attempt": self.attempt + 1,
                "failed": self.failed}


class InitRunner:
    """Advances the init steps of instances on `runtime`, one reconcile tick at a time."""

    def __init__(self, runtime: Runtime, clock: Callable[[], float]):
        self.runtime, self.clock = runtime, clock

    def advance(self, steps: tuple[InitStep, ...], progress: InitProgress, key: str,
                main: Callable[[], ContainerSpec], statuses: Mapping[str, ContainerStatus]) -> bool:
        """Move instance `key`'s `progress` on as far as it can go now; True once every step passed.
        `main` makes the instance's container spec (netns and secrets filled in: called only when
        a step starts); `statuses` are the runtime's init containers as listed this tick."""
        if self.runtime.kind == "sim":
            progress.step = progress.total
        while not progress.done and progress.failed is None:
            name = container_name(key, progress.step)
            step = steps[progress.step]
            status = statuses.get(name)
            now = self.clock()
            if status is None or status.state == "created":
                if status is not None:  # a start that failed half-way: start over
                    self.runtime.remove(name)
                if now < progress.retry_at:
                    return False
                try:
                    spec = replace(main(), name=name, command=step.exec)
                except (CcaError, OSError) as exc:  # e.g. its secrets could not be fetched
                    self._failed(progress, step, -1, f"could not prepare: {exc}", now)
                    return False
                self._start(spec, progress, step)
                return False
            if status.state in ("running", "starting"):
                if progress.started is None:  # found running after an agent restart: time it from now
                    progress.started = now
                if now - progress.started < step.timeout:
                    return False
                self.runtime.stop(name, timeout=1.0)
                code: int | None = None
            else:
                code = status.exit_code if status.exit_code is not None else -1
            output = self._collect(name, progress, step, code)
            statuses = {n: s for n, s in statuses.items() if n != name}
            if code == 0:
                progress.step += 1
                progress.attempt, progress.started, progress.retry_at = 0, None, 0.0
                continue
            self._failed(progress, step, code, output, now)
        return progress.done

    def _start(self, spec: ContainerSpec, progress: InitProgress, step: InitStep) -> None:
        progress.started = self.clock()
        try:
            self.runtime.create(spec)
            self.runtime.start(spec.name)
        except (CcaError, OSError) as exc:
            self.runtime.remove(spec.name)
            self._append(spec.name, progress, f"[cca] could not start: {exc}\n".encode())
            self._failed(progress, step, -1, f"could not start: {exc}", self.clock())

    def _failed(self, progress: InitProgress, step: InitStep, code: int | None, output: str,
                now: float) -> None:
        progress.attempt += 1
        progress.started = None
        if progress.attempt > step.retry:
            progress.failed = {"step": progress.step + 1, "exec": step.exec, "exit_code": code,
                               "attempts": progress.attempt, "output": output[-TAIL_BYTES:]}
            log.warning("%s", progress.reason((step,) * progress.total, now))
        else:
            progress.retry_at = now + min(MAX_DELAY, 2.0 ** (progress.attempt - 1))

    def _collect(self, name: str, progress: InitProgress, step: InitStep, code: int | None) -> str:
        """Move the finished step's output into the init log and remove its container."""
        try:
            data = self.runtime.logs(name)
        except CcaError:
            data = b""
        ending = "timed out" if code is None else f"exit code {code}"
        header = f"--- init step {progress.step + 1}/{progress.total}: {step.exec} ---\n".encode()
        self._append(name, progress, header + data + f"--- {ending} ---\n".encode())
        self.runtime.remove(name)
        return data[-TAIL_BYTES:].decode(errors="replace")

    def _append(self, name: str, progress: InitProgress, data: bytes) -> None:
        key = owner(name) or name
        try:
            path = self.runtime.init_log_path(key, create=True)
        except CcaError:  # a runtime that keeps no logs
            return
        with open(path, "ab") as out:
            out.write(data)

    def forget(self, key: str) -> None:
        """The instance is gone (or replaced): drop its init log."""
        try:
            self.runtime.init_log_path(key, create=True).unlink(missing_ok=True)
        except (CcaError, OSError):
            pass
