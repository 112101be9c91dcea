"""Pre-started policy workers: operator `.lp` policies are judged there, never in the server.

Clingo grounding cannot be interrupted in-process, and an abort in one of its nothrow callbacks
ends the process it runs in; so every operator policy is grounded and solved in a worker
(policy_worker.py) under hard limits (`PolicyLimits`): a wall-clock budget per policy (the worker
is killed when grounding overruns it; solving stops itself), an address-space cap (RLIMIT_AS), and
a bound on what it may send back. A worker that is killed, dies or misbehaves is replaced in the
background; the request it served is refused (`PolicyFailure`, which evaluate.py turns into a
`policy_budget` / `policy_crashed` / `policy_error` denial naming the policy and the budget).

`configure(limits)` sets the limits (the API server calls it at start-up with `cca server`'s
options) and pre-starts the workers; `pool()` is the process's pool, started on first use.
"""

from __future__ import annotations

import hashlib
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from clingo import Symbol

from ccattler.engine.admission.policy_wire import (
    WireError,
    decode_frame,
    decode_symbol,
    frame_length,
    write_frame,
)


@dataclass(frozen=True, slots=True)
class PolicyLimits:
    """What one operator policy may spend judging one request (docs/api.md, "Limits")."""

    #: Wall clock for grounding + solving one policy over one request's facts.
    seconds: float = 2.0
    #: Address space of each worker (RLIMIT_AS): the memory budget of grounding and solving.
    memory_bytes: int = 1 << 30
    #: Solver conflicts per policy (the programs are stratified: a real policy needs none; None: no cap).
    conflicts: int | None = 10_000
    #: Output atoms (deny/warn/message/set_default) per policy, and bytes of one answer.
    max_atoms: int = 10_000
    max_reply_bytes: int = 16 * 1024 * 1024
    #: Workers kept started: requests judged at once before one waits for a worker.
    workers: int = 2
    #: How long a request waits for a free (or restarting) worker before it is refused.
    wait_seconds: float = 15.0
    #: Wall clock of one netpolicy solve with operator extensions (the whole cluster's facts), and
    #: the atoms its answer may hold (the reply is capped by `max_reply_bytes` too).
    netpolicy_seconds: float = 30.0
    netpolicy_max_atoms: int = 2_000_000


@dataclass(frozen=True, slots=True)
class PolicyFailure:
    """Why a policy gave no verdict, as the denial code evaluate.py gives it: `policy_budget` (a
    budget ran out: `budget` is "grounding time", "solving time", "memory", "output" or "worker
    wait"), `policy_crashed` (its worker died or was killed mid-request) or `policy_error` (the
    program failed, or has no answer)."""

    code: str
    budget: str | None
    message: str


class _Dead(Exception):
    """The worker died, was killed or broke the protocol."""


class _Overrun(Exception):
    """The deadline passed before the worker answered."""


class Worker:
    """One started worker process and its pipes."""

    def __init__(self, limits: PolicyLimits) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ccattler.engine.admission.policy_worker", str(limits.memory_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
        )
        self.limit = limits.max_reply_bytes
        self.served = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, message: dict[str, Any]) -> None:
        try:
            write_frame(self.process.stdin, message)  # type: ignore[arg-type]
        except (OSError, ValueError) as exc:
            raise _Dead(f"the worker's pipe closed ({type(exc).__name__})") from None

    def receive(self, deadline: float) -> dict[str, Any]:
        """The next frame, or `_Overrun` at `deadline` (monotonic), `_Dead` when it died."""
        stdout = self.process.stdout
        assert stdout is not None
        try:
            fd = stdout.fileno()
            header = self._read(fd, 4, deadline)
            body = self._read(fd, frame_length(header, self.limit), deadline)
            message = decode_frame(body)
        except WireError as exc:
            raise _Dead(str(exc)) from None
        except (OSError, ValueError) as exc:  # closed under us: the pool is closing
            raise _Dead(f"the worker's pipe closed ({type(exc).__name__})") from None
        if not isinstance(message, dict):
            raise _Dead("the worker sent something that is not a message")
        return message

    @staticmethod
    def _read(fd: int, count: int, deadline: float) -> bytes:
        chunks, left = [], count
        while left:
            wait = deadline - time.monotonic()
            try:
                if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                    raise _Overrun()
                chunk = os.read(fd, min(left, 1 << 20))
            except (OSError, ValueError) as exc:  # closed under us: the pool is closing
                raise _Dead(f"the worker's pipe closed ({type(exc).__name__})") from None
            if not chunk:
                raise _Dead("the worker exited")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def death(self) -> str:
        """How it ended ("signal 9", "exit status 3"), once it has."""
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "still running"
        return f"signal {-code}" if code < 0 else f"exit status {code}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()  # type: ignore[union-attr]
            except OSError:
                pass


class PolicyPool:
    """`workers` started workers; `evaluate` and `reads` borrow one per call."""

    def __init__(self, limits: PolicyLimits = PolicyLimits()) -> None:
        self.limits = limits
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._all: set[Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._reads: OrderedDict[str, frozenset[tuple[str, int]]] = OrderedDict()
        #: Workers replaced after dying or being killed (for metrics and tests).
        self.replaced = 0
        self._spawns: queue.Queue[bool] = queue.Queue()
        threading.Thread(target=self._spawner, name="cca-policy-workers", daemon=True).start()
        for _ in range(limits.workers):
            self._start()

    def _start(self) -> None:
        """Ask for one more worker; it becomes idle once it says it is ready."""
        self._spawns.put(True)

    def _spawner(self) -> None:
        # One long-lived thread starts every worker: PR_SET_PDEATHSIG fires when the *thread* that
        # forked a worker ends, so a short-lived starter thread would take its worker with it.
        while self._spawns.get() and not self._closed:
            while not self._closed and not self._boot():
                time.sleep(0.5)  # a worker that cannot start: do not spin

    def _boot(self) -> bool:
        try:
            worker = Worker(self.limits)
        except OSError:
            return False
        with self._lock:
            self._all.add(worker)
        try:
            if "ready" in worker.receive(time.monotonic() + 60.0) and not self._closed:
                self._idle.put(worker)
                return True
        except (_Dead, _Overrun):
            pass
        self._discard(worker)
        return self._closed

    def _discard(self, worker: Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)

    def _replace(self, worker: Worker) -> None:
        self._discard(worker)
        self.replaced += 1
        if not self._closed:
            self._start()

    def pids(self) -> list[int]:
        """The live worker processes (started or starting)."""
        with self._lock:
            return sorted(w.pid for w in self._all if w.process.poll() is None)

    def _borrow(self) -> Worker | None:
        """An idle live worker; one that died while idle (OOM killer, an operator) is replaced,
        never handed to a request."""
        deadline = time.monotonic() + self.limits.wait_seconds
        while (wait := deadline - time.monotonic()) > 0:
            try:
                worker = self._idle.get(timeout=wait)
            except queue.Empty:
                return None
            if worker.process.poll() is None:
                return worker
            self._replace(worker)
        return None

    def evaluate(self, name: str, text: str, facts: list[Any]) -> list[Symbol] | PolicyFailure:
        """Policy `name`'s output atoms over `facts` (symbol trees, policy_wire.py), or why not."""
        limits = self.limits
        return self._run({"op": "eval", "name": name, "text": text, "facts": facts,
                          "conflicts": limits.conflicts, "max_atoms": limits.max_atoms}, limits.seconds)

    def netpolicy(self, extensions: list[tuple[str, str]], facts: list[Any]) -> Any:
        """rules/netpolicy.lp's answer with operator `extensions` ((label, text) pairs) over
        `facts` (compact JSON, engine/netpolicy/isolated.py), within `netpolicy_seconds` and the same
        memory and output caps, or a `PolicyFailure` saying why not."""
        limits = self.limits
        return self._run({"op": "netpolicy", "name": "netpolicy", "extensions": [list(e) for e in extensions],
                          "facts": facts, "conflicts": limits.conflicts,
                          "max_atoms": limits.netpolicy_max_atoms}, limits.netpolicy_seconds)

    def _run(self, request: dict[str, Any], seconds: float) -> Any:
        """The worker's answer to `request` (symbols, or a netpolicy's JSON), or a `PolicyFailure`."""
        limits = self.limits
        worker = self._borrow()
        if worker is None:
            return PolicyFailure("policy_budget", "worker wait",
                                 f"no policy worker became free within {limits.wait_seconds:g} s")
        phase = "grounding"
        start = time.monotonic()
        # Solving stops itself at `seconds`; the grace lets it say so before it is killed.
        deadline = start + seconds + 0.5
        try:
            worker.send({**request, "seconds": seconds})
            reply = worker.receive(deadline)
            if reply.get("phase") == "grounded":
                phase = "solving"
                reply = worker.receive(deadline)
        except _Overrun:
            self._replace(worker)
            return PolicyFailure("policy_budget", f"{phase} time",
                                 f"{phase} did not finish within {seconds:g} s")
        except _Dead:
            how = worker.death()
            self._replace(worker)
            return PolicyFailure("policy_crashed", None, f"its worker process died during {phase} ({how}; "
                                 "killed, or clingo aborted); the worker was replaced")
        if reply.pop("exit", False):
            self._replace(worker)
        else:
            self._idle.put(worker)
        return self._outcome(reply, phase, seconds, request["max_atoms"])

    def _outcome(self, reply: dict[str, Any], phase: str, seconds: float,
                 max_atoms: int) -> Any:
        limits = self.limits
        error = reply.get("error")
        if error is None and "policy" in reply:
            return reply["policy"]  # a netpolicy answer: engine/netpolicy/isolated.py reads it
        if error is None:
            try:
                return [decode_symbol(tree) for tree in reply.get("symbols", ())]
            except WireError as exc:
                return PolicyFailure("policy_budget", "output", f"its answer could not be read ({exc})")
        if error == "memory":
            return PolicyFailure("policy_budget", "memory",
                                 f"{phase} needed more than its {limits.memory_bytes >> 20} MiB")
        if error == "solving":
            timed_out = reply.get("timed_out") or limits.conflicts is None
            why = f"{seconds:g} s" if timed_out else f"{limits.conflicts} conflicts"
            return PolicyFailure("policy_budget", "solving time", f"solving did not finish within {why}")
        if error == "output":
            return PolicyFailure("policy_budget", "output",
                                 f"it derived {reply.get('count')} output atoms, over {max_atoms}")
        if error == "unsatisfiable":
            return PolicyFailure("policy_error", None, "it has no answer over this request (unsatisfiable)")
        return PolicyFailure("policy_error", None, str(reply.get("message", error)))

    def reads(self, text: str) -> frozenset[tuple[str, int]]:
        """The predicates a policy reads (parsed in a worker, cached by text); empty when it cannot
        be parsed in time (evaluating it then reports why)."""
        key = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
        with self._lock:
            if key in self._reads:
                self._reads.move_to_end(key)
                return self._reads[key]
        worker = self._borrow()
        if worker is None:
            return frozenset()
        try:
            worker.send({"op": "reads", "text": text})
            reply = worker.receive(time.monotonic() + self.limits.seconds + 0.5)
        except (_Dead, _Overrun):
            self._replace(worker)
            return frozenset()
        self._idle.put(worker)
        try:
            found = frozenset((str(n), int(a)) for n, a in reply.get("reads", ()))
        except (TypeError, ValueError):
            found = frozenset()
        with self._lock:
            self._reads[key] = found
            while len(self._reads) > 256:
                self._reads.popitem(last=False)
        return found

    def close(self) -> None:
        self._closed = True
        self._spawns.put(False)
        with self._lock:
            workers = list(self._all)
            self._all.clear()
        for worker in workers:
            worker.kill()


_pool: PolicyPool | None = None
_pool_lock = threading.Lock()


def configure(limits: PolicyLimits) -> PolicyPool:
    """Replace the process's pool with one started with `limits`."""
    global _pool
    with _pool_lock:
        old, _pool = _pool, PolicyPool(limits)
    if old is not None:
        old.close()
    return _pool


def current_limits() -> PolicyLimits:
    """The limits admission applies now (without starting a pool): what validation checks against."""
    with _pool_lock:
        return _pool.limits if _pool is not None else PolicyLimits()


def pool() -> PolicyPool:
    """The process's pool (default limits unless `configure` was called)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = PolicyPool()
        return _pool
