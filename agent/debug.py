"""A node runtime's own view, for `cca node-inspect NODE` (through the tunnel) and `cca agent debug`
(locally): every container the runtime holds, its state, process, usage and log size."""

from __future__ import annotations

from typing import Any

from ccattler.agent.runtime.base import Runtime
from ccattler.engine.facts import CcaError


def node_report(runtime: Runtime) -> dict[str, Any]:
    """JSON-ready: runtime kind and one entry per container (running ones with usage)."""
    containers = []
    for status in sorted(runtime.list(), key=lambda s: s.name):
        entry: dict[str, Any] = {"name": status.name, "state": status.state, "pid": status.pid,
                                 "exit_code": status.exit_code, "reason": status.reason,
                                 "started_at": status.started_at, "spec_hash": status.spec_hash,
                                 "usage": None, "log_bytes": None}
        if status.state == "running":
            try:
                usage = runtime.stats(status.name)
                entry["usage"] = {"cpu_seconds": round(usage.cpu_seconds, 3), "memory": usage.memory_bytes,
                                  "pids": usage.pids}
            except (CcaError, OSError, ValueError):
                pass
        try:
            path = runtime.log_path(status.name)
            entry["log_bytes"] = sum(p.stat().st_size for p in (path, path.with_name(path.name + ".1"))
                                     if p.exists())
        except (CcaError, OSError):
            pass
        containers.append(entry)
    return {"runtime": runtime.kind, "containers": containers}
