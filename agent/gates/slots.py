"""Server slots of each gate backend and the runtime-API commands that move them.

A backend has a fixed number of server slots (`s1`…`sN`; a slot's sticky cookie follows the
address it holds, config.py): an endpoint keeps its slot while it stays, a gone endpoint's slot
goes to maintenance, a new one takes the lowest free slot. Filling or emptying a slot is a
runtime-API change (established connections stay); only needing more slots than the backend has
is a structural change (a reload with twice as many).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

MIN_SLOTS = 8


def slot_count(wanted: int) -> int:
    """Slots for `wanted` endpoints: a power of two ≥ MIN_SLOTS with room for as many again."""
    n = MIN_SLOTS
    while n < 2 * wanted:
        n *= 2
    return n


def server_name(slot: int) -> str:
    return f"s{slot}"


@dataclass(slots=True)
class Slots:
    """One backend's slots: slot number (1-based) → (instance, address)."""

    size: int
    taken: dict[int, tuple[str, str]] = field(default_factory=dict)

    def fits(self, endpoints: Mapping[str, str]) -> bool:
        return len(endpoints) <= self.size

    def update(self, backend: str, endpoints: Mapping[str, str], port: int) -> list[str]:
        """Move to `endpoints` (instance → address); the runtime-API commands that do it."""
        if not self.fits(endpoints):
            raise ValueError(f"{backend}: {len(endpoints)} endpoints for {self.size} slots")
        commands = []
        kept = {}
        for slot, (instance, address) in sorted(self.taken.items()):
            if endpoints.get(instance) == address:
                kept[slot] = (instance, address)
            else:
                commands.append(f"set server {backend}/{server_name(slot)} state maint")
        placed = {instance for instance, _ in kept.values()}
        free = (s for s in range(1, self.size + 1) if s not in kept)
        for instance in sorted(set(endpoints) - placed):
            slot = next(free)
            kept[slot] = (instance, endpoints[instance])
            name = f"{backend}/{server_name(slot)}"
            commands += [f"set server {name} addr {endpoints[instance]} port {port}",
                         f"set server {name} state ready"]
        self.taken = kept
        return commands

    @classmethod
    def fresh(cls, endpoints: Mapping[str, str], size: int | None = None) -> Slots:
        """Slots holding `endpoints` in instance order (a first start or a reload)."""
        size = size or slot_count(len(endpoints))
        return cls(size, {i: (inst, endpoints[inst]) for i, inst in enumerate(sorted(endpoints), 1)})

    def resized(self, endpoints: Mapping[str, str], size: int) -> Slots:
        """`size` slots for a reload, keeping the slots of endpoints that stay (their cookies stay
        valid; `size` is at least the highest of those slots)."""
        grown = Slots(max(size, *self.taken, 0) if self.taken else size, dict(self.taken))
        grown.update("", endpoints, 0)
        return grown
