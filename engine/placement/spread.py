"""Zone spread decided by arithmetic before the solve: per-zone replica counts, then nodes.

The soft spread term of rules/placement.lp loses to the solving budget in large rounds, so for
each spread unit this module decides how many new replicas each eligible zone gets (skew ≤ 1
wherever capacity allows: one replica at a time to the zone holding fewest, among the zones with
room left), and the program takes them as hard per-zone caps (`zone_quota/3`). A zone with too
little room is recorded as a `ZoneShort`, which `cca explain` reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ZoneShort:
    """Zone `zone` ends with `has` replicas of the unit while the fullest zone has `top`: it had
    room for only `room` more (cpu or memory of its eligible nodes, after earlier placements)."""

    zone: str
    has: int
    top: int
    room: int


def zone_quotas(
    pending: int, placed: Mapping[str, int], room: Mapping[str, int]
) -> tuple[dict[str, int], tuple[ZoneShort, ...]]:
    """New replicas per eligible zone (`room`: zone → how many more fit there; `placed`: zone →
    replicas already running), and the zones that end below the balanced share for lack of room."""
    zones = sorted(set(room) | set(placed))
    count = {z: placed.get(z, 0) for z in zones}
    left = {z: room.get(z, 0) for z in zones}
    quota = dict.fromkeys(zones, 0)
    for _ in range(pending):
        open_zones = [z for z in zones if left[z] > 0]
        if not open_zones:
            break
        zone = min(open_zones, key=lambda z: (count[z], -left[z], z))
        count[zone] += 1
        left[zone] -= 1
        quota[zone] += 1
    top = max(count.values(), default=0)
    short = tuple(ZoneShort(z, count[z], top, room.get(z, 0)) for z in zones
                  if count[z] < top - 1 and left[z] == 0)
    return quota, short


def skew(counts: Mapping[str, int]) -> int:
    """max − min replicas over the zones given (0 for none)."""
    return max(counts.values()) - min(counts.values()) if counts else 0
