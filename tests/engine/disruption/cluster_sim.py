"""A whole control loop over a dict store: the default controllers plus agents that start what is
placed on their node (ready one tick later) and stop what is not — so drains and rebalancing can
be stepped tick by tick and every instance change recorded."""

from __future__ import annotations

from controller_builders import World, node, service

from ccattler.engine.controllers.registry import ControllerConfig, default_controllers
from ccattler.engine.disruption.controller import is_ready
from ccattler.engine.disruption.rebalance import RebalanceOptions


class Sim:
    def __init__(self, nodes: dict[str, int], *services: tuple[str, dict],
                 rebalance: RebalanceOptions | None = None) -> None:
        self.world = World(*(node(n, capacity={"cpu": cpu, "memory": 8 << 30}) for n, cpu in nodes.items()),
                           *services)
        options = rebalance or RebalanceOptions(grace=0, interval=0, cooldown=300)
        self.controllers = default_controllers(ControllerConfig(rebalance=options))
        self.now = 1000.0
        self.history: list[dict[str, tuple[str | None, bool]]] = []

    def agents(self) -> None:
        """Each placed instance: starting on its first tick there, running and ready the next."""
        values = self.world.values
        placed = {k[len("derived/placement/"):]: d.get("node") for k, d in values.items()
                  if k.startswith("derived/placement/")}
        for key in [k for k in values if k.startswith("observed/instance/")]:
            name = key[len("observed/instance/"):]
            if name not in placed or placed[name] != values[key]["node"] or placed[name] is None:
                self.world.delete(key)
        for name, node_name in placed.items():
            key = f"observed/instance/{name}"
            if node_name is None or node_name not in self.nodes():
                continue
            doc = values.get(key)
            if doc is None:
                self.world.put(key, {"node": node_name, "state": "starting", "ready": False})
            elif doc["state"] == "starting":
                self.world.put(key, {"node": node_name, "state": "running", "ready": True})

    def nodes(self) -> set[str]:
        return {k.split("/")[2] for k in self.world.values if k.startswith("observed/node/")}

    def tick(self, seconds: float = 10.0) -> None:
        self.now += seconds
        for controller in self.controllers:
            self.world.apply(controller.reconcile(self.world.snapshot(), self.now))
        self.agents()
        self.history.append(self.instances())

    def instances(self, service_name: str | None = None) -> dict[str, tuple[str | None, bool]]:
        """instance → (node, ready) of the instances that exist."""
        values = self.world.values
        out = {}
        for key, doc in values.items():
            if not key.startswith("derived/instance/"):
                continue
            if service_name and doc["service"] != f"default/{service_name}":
                continue
            tenant = key.split("/")[2]
            node_name = (values.get(f"derived/placement/{tenant}/{doc['name']}") or {}).get("node")
            out[doc["name"]] = (node_name, is_ready(values.get(f"observed/instance/{tenant}/{doc['name']}"),
                                                    node_name))
        return out

    def ready(self, service_name: str) -> int:
        return sum(r for _, r in self.instances(service_name).values())

    def settle(self, ticks: int = 8) -> None:
        for _ in range(ticks):
            self.tick()

    def intent(self, node_name: str, intent: str | None) -> None:
        key = f"intent/node/{node_name}"
        if intent is None:
            self.world.delete(key)
        else:
            self.world.put(key, {"intent": intent, "by": "test"})

    def condition(self, node_name: str) -> str | None:
        return (self.world.values.get(f"derived/node/{node_name}") or {}).get("condition")


__all__ = ["Sim", "service"]
