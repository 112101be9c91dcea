"""The node agent below its API connection: runtimes, images, container networking, and the
reconcile core that turns the node's slice of facts into running containers and observed facts.

An agent process is `AgentLoop(AgentClient(client), NodeCore(node, make_runtime(kind, state_dir,
ImageStore(state_dir)), state_dir=state_dir), node_document(...)).run(stop_event)`: it registers,
heartbeats, folds the slice (`SliceState`), reconciles on changes and every tick, and reports only
changes (`Reporter`).
Names are imported on first use, so `cca image …` does not pay for pyroute2.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "InstanceSpec": "desired", "desired_instances": "desired", "node_subnet": "desired",
    "RUNTIMES": "machine", "NodeCore": "node", "default_runtime_kind": "machine",
    "machine_capacity": "machine", "make_runtime": "machine", "node_document": "machine",
    "cleanup_node": "machine",
    "default_state_dir": "paths",
    "Backoff": "reconcile", "Reconciler": "reconcile",
    "Reporter": "slice_state", "SliceState": "slice_state",
    "AgentLoop": "loop",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
