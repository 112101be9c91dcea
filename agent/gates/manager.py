"""`Gates`: keeps the node's HAProxy in step with the slice. A change of endpoints only is sent
through the runtime API (slots filled or emptied, established connections untouched); a change of
structure — a gate added or removed, its hosts, path, port, stickiness, the node address, a backend
outgrowing its slots — rewrites the config and reloads. A refused runtime command falls back to a
reload (the config always carries the current slots). Failures are logged and retried on the next
sync; they never reach the agent loop."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ccattler.agent.gates.config import render
from ccattler.agent.gates.model import Gate, backend_addresses, gates_from_slice, node_address
from ccattler.agent.gates.process import HaproxyProcess
from ccattler.agent.gates.runtime_api import RuntimeApi, RuntimeApiError, SocketRuntimeApi, run_all
from ccattler.agent.gates.slots import Slots, slot_count
from ccattler.agent.gates.stats import backend_request_totals
from ccattler.agent.service_metrics import Rates
from ccattler.engine.facts import CcaError

log = logging.getLogger(__name__)


class Gates:
    def __init__(self, node: str, state_dir: Path, *, process: HaproxyProcess | None = None,
                 api: RuntimeApi | None = None) -> None:
        self.node = node
        self.process = process or HaproxyProcess(state_dir / "gates")
        self.api = api or SocketRuntimeApi(self.process.socket)
        self._structure: tuple[Any, ...] | None = None  # what the running config was rendered from
        self._slots: dict[str, Slots] = {}
        self._said: set[str] = set()  # problems logged already (sync runs every second)
        self._rates = Rates()
        #: Counters for tests and `cca describe`: reloads (incl. the first start) and runtime changes.
        self.reloads = self.runtime_changes = 0

    def sync(self, facts: Mapping[str, Any]) -> None:
        try:
            self._sync(facts)
        except (CcaError, OSError, subprocess.SubprocessError, ValueError) as exc:
            self._structure = None  # retried on the next sync, by a reload
            self._say(f"gates: {exc}", logging.ERROR)

    def _sync(self, facts: Mapping[str, Any]) -> None:
        gates, problems = gates_from_slice(facts)
        for problem in problems:
            self._say(f"gates: skipped {problem}")
        address = node_address(facts, self.node)
        if not gates or address is None:
            if gates:
                self._say(f"gates: node {self.node} has no address yet; its gates wait")
            if self._structure is not None or self.process.master_pid() is not None:
                self.stop()
            return
        endpoints = {g.backend: backend_addresses(facts, g) for g in gates}
        sizes = tuple(self._size(g, endpoints[g.backend]) for g in gates)
        structure = (address, tuple(gates), sizes)
        if structure == self._structure:
            commands = [c for g in gates for c in self._slots[g.backend].update(
                g.backend, endpoints[g.backend], g.target_port)]
            if not commands:
                return
            try:
                run_all(self.api, commands)
                self.runtime_changes += 1
                return
            except RuntimeApiError as exc:
                self._say(f"gates: {exc}; reloading instead", logging.WARNING)
        self._reload(gates, endpoints, address, structure)

    def _size(self, gate: Gate, endpoints: Mapping[str, str]) -> int:
        slots = self._slots.get(gate.backend)
        return slots.size if slots is not None and slots.fits(endpoints) else slot_count(len(endpoints))

    def _reload(self, gates: list[Gate], endpoints: Mapping[str, Mapping[str, str]], address: str,
                structure: tuple[Any, ...]) -> None:
        self.process.check_paths()
        slots = {}
        for (gate, size) in zip(gates, structure[2], strict=True):
            old, wanted = self._slots.get(gate.backend), endpoints[gate.backend]
            slots[gate.backend] = old.resized(wanted, size) if old else Slots.fresh(wanted, size)
        self._structure = None
        self.process.write(render(gates, slots, address, self.process.socket))
        self.process.start_or_reload()
        self._slots, self._structure = slots, structure
        self.reloads += 1
        self._said.clear()
        log.info("gates: HAProxy serves %s on %s", ", ".join(g.name for g in gates), address)

    def request_rates(self, now: float) -> dict[str, float] | None:
        """Target service (`tenant/name`) → HTTP requests/s through this node's gates since the
        previous call (gates to one service summed); None when HAProxy could not be asked."""
        if self._structure is None:
            return {}
        try:
            rates = self._rates.sample(backend_request_totals(self.api), now)
        except RuntimeApiError as exc:
            self._say(f"gates: no request counters: {exc}")
            return None
        out: dict[str, float] = {}
        for gate in self._structure[1]:
            if gate.backend in rates:
                out[gate.target] = out.get(gate.target, 0.0) + rates[gate.backend]
        return out

    def stop(self) -> None:
        """Stop HAProxy and remove its files (no gates left, or the node goes away)."""
        self.process.stop()
        self._structure, self._slots = None, {}

    def _say(self, message: str, level: int = logging.WARNING) -> None:
        if message not in self._said:
            self._said.add(message)
            log.log(level, "%s", message)


def cleanup_gates(state_dir: Path) -> None:
    """Stop a node's HAProxy and remove its files without the agent that started it (`cca down`)."""
    HaproxyProcess(state_dir / "gates").stop()
