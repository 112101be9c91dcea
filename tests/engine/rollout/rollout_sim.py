"""A whole control loop over a dict store for rollouts: the default controllers plus agents that
start what is placed on their node (ready one tick later) and stop what is not. An instance whose
image ends in `:bad` crashes on every tick (its restart count grows, it is never ready), like a
`command "exit 1"`. Every tick records each instance's spec and readiness."""

from __future__ import annotations

from controller_builders import World, node, service

from ccattler.engine.controllers.registry import ControllerConfig, default_controllers
from ccattler.engine.disruption.controller import is_ready
from ccattler.engine.disruption.rebalance import RebalanceOptions


class Sim:
    def __init__(self, *services: tuple[str, dict], nodes: int = 3) -> None:
        self.world = World(*(node(f"n{i}", capacity={"cpu": 64000, "memory": 64 << 30})
                             for i in range(1, nodes + 1)), *services)
        self.controllers = default_controllers(ControllerConfig(rebalance=RebalanceOptions(enabled=False)))
        self.now = 1000.0
        self.history: list[dict[str, tuple[str, bool]]] = []

    def agents(self) -> None:
        values = self.world.values
        placed = {k[len("derived/placement/"):]: d.get("node") for k, d in values.items()
                  if k.startswith("derived/placement/")}
        images = {f"{k.split('/')[2]}/{d['name']}": (d.get("image"), d.get("spec")) for k, d in values.items()
                  if k.startswith("derived/instance/")}
        for key in [k for k in values if k.startswith("observed/instance/")]:
            name = key[len("observed/instance/"):]
            if placed.get(name) is None or placed[name] != values[key]["node"]:
                self.world.delete(key)
        for name, node_name in placed.items():
            key = f"observed/instance/{name}"
            if node_name is None:
                continue
            image, spec = images.get(name, (None, None))
            doc = values.get(key)
            if doc is not None and doc.get("spec") != spec:
                doc = None  # a stateful ordinal rewritten in place: a new container
            if str(image).endswith(":bad"):
                restarts = (doc or {}).get("restarts", 0) + (doc is not None)
                self.world.put(key, {"node": node_name, "state": "failed", "ready": False,
                                     "restarts": restarts, "reason": "exited with code 1", "spec": spec})
            elif doc is None:
                self.world.put(key, {"node": node_name, "state": "starting", "ready": False, "restarts": 0,
                                     "spec": spec})
            elif doc["state"] == "starting":
                self.world.put(key, {**doc, "state": "running", "ready": True})

    def tick(self, seconds: float = 10.0) -> None:
        self.now += seconds
        for controller in self.controllers:
            self.world.apply(controller.reconcile(self.world.snapshot(), self.now))
        self.agents()
        self.history.append(self.instances())

    def instances(self, service_name: str = "web") -> dict[str, tuple[str, bool]]:
        """instance → (spec, ready) of the service's instances that exist."""
        values = self.world.values
        out = {}
        for key, doc in values.items():
            if key.startswith(f"derived/instance/default/{service_name}/"):
                node_name = (values.get(f"derived/placement/default/{doc['name']}") or {}).get("node")
                report = values.get(f"observed/instance/default/{doc['name']}")
                out[doc["name"]] = (doc["spec"], is_ready(report, node_name))
        return out

    def rollout(self, service_name: str = "web") -> dict:
        return self.world.values.get(f"derived/rollout/default/{service_name}") or {}

    def settle(self, ticks: int = 40) -> None:
        for _ in range(ticks):
            self.tick()
            if self.rollout().get("state") in ("complete", "rolled back", "failed") and all(
                    ready for _, ready in self.instances().values()):
                return


__all__ = ["Sim", "service"]
