"""Seats of `share network` service groups: one network namespace, one address, for the instances of
a group's services that run together on this node (docs/agent.md, "Service groups").

Placement puts replica k of every member on one node (rules/placement.lp); on the node the agent
pairs them into *seats*: each instance of a member service takes the lowest seat of its group that
has no instance of its service yet, and keeps it while it is placed here (a replacement of one
member takes the seat its predecessor left). Seats are remembered in `<state>/sandboxes.json`, so an
agent restart pairs the running containers as before.

A seat's members run only while the seat is complete — every service of the group has its instance
in it — which is both rules of the issue: members start together (none starts before all are here)
and stop together (when one leaves without a replacement, the others are stopped and wait, reported
`pending` with the reason). The seat's namespace is the node network's attachment `group:<t>/<g>#<k>`
with the address of one of its members (the network controller's address of that instance; it
moves to another member when its holder leaves, which replaces the others). A crash of one member
restarts only that member (as a pod's containers restart one by one).

Refused, with the reason in every member's observed document: members whose exposed ports clash
(the compiler and admission refuse this, admission also across applies; a group stored before
admission checked it can still reach the node), and `share network` on the
process runtime, which has no network namespaces. The sim runtime passes members as they are.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ccattler.agent.desired import InstanceSpec
from ccattler.engine.facts import CcaError
from ccattler.engine.facts.groups import port_clashes
from ccattler.engine.facts.keys import DESIRED_GROUPS, DESIRED_SERVICES

log = logging.getLogger(__name__)
SANDBOX_PREFIX = "group:"


@dataclass(slots=True)
class Seat:
    """Seat `index` of a group on this node: service → instance key of its member, and the address."""

    index: int
    members: dict[str, str] = field(default_factory=dict)
    ip: str | None = None

    def name(self, group: str) -> str:
        return f"{SANDBOX_PREFIX}{group}#{self.index}"


@dataclass(slots=True)
class Arrangement:
    """What the reconciler runs (seat members rewritten to their seat's namespace and address), and
    the members held back: instance key → (state, reason)."""

    run: dict[str, InstanceSpec]
    held: dict[str, tuple[str, str]] = field(default_factory=dict)


def _natural(spec: InstanceSpec) -> tuple[int, str]:
    suffix = spec.name.rsplit("-", 1)[-1]
    return (int(suffix) if suffix.isdigit() else -1, spec.name)


class Sandboxes:
    """The seats of every `share network` group with members on this node."""

    def __init__(self, runtime_kind: str, state_dir: Path | str | None = None):
        self.runtime_kind = runtime_kind
        self.path = Path(state_dir) / "sandboxes.json" if state_dir is not None else None
        self.seats: dict[str, list[Seat]] = self._load()

    def arrange(self, desired: Mapping[str, InstanceSpec], facts: Mapping[str, Any],
                network: Any = None) -> Arrangement:
        """Split `desired` into what runs and what waits. `network` (a NodeNetwork, runc only) gets
        each complete seat's namespace attached before its members start (never two at once)."""
        arrangement = Arrangement(run={})
        by_group: dict[str, list[InstanceSpec]] = {}
        for key, spec in desired.items():
            group = facts.get(f"{DESIRED_GROUPS}{spec.group}") if spec.group else None
            if isinstance(group, dict) and group.get("share_network") and self.runtime_kind != "sim":
                by_group.setdefault(str(spec.group), []).append(spec)
            else:
                arrangement.run[key] = spec
        before = self._dump()
        for name in set(self.seats) - set(by_group):
            del self.seats[name]
        for name, members in by_group.items():
            self._arrange_group(name, facts[f"{DESIRED_GROUPS}{name}"], members, facts, network, arrangement)
        if self._dump() != before:
            self._save()
        return arrangement

    def _arrange_group(self, name: str, group: Mapping[str, Any], members: list[InstanceSpec],
                       facts: Mapping[str, Any], network: Any, out: Arrangement) -> None:
        services = [str(s) for s in group.get("services") or []]
        if self.runtime_kind == "process":
            for spec in members:
                out.held[spec.key] = ("failed", f"group {name} shares its network: the process runtime has "
                                                "no network namespaces (run this node with --runtime runc)")
            return
        clashes = port_clashes({s: facts.get(f"{DESIRED_SERVICES}{s}") for s in services})
        if clashes:
            for spec in members:
                out.held[spec.key] = ("failed", f"group {name} shares its network, but {'; '.join(clashes)}")
            return
        seats = self._seat(name, members)
        by_key = {spec.key: spec for spec in members}
        for seat in seats:
            missing = [s for s in services if s not in seat.members]
            specs = [by_key[seat.members[s]] for s in services if s in seat.members]
            if missing:
                reason = (f"waiting for {', '.join(missing)} of group {name} on this node "
                          "(members of a shared network start and stop together)")
                for spec in specs:
                    out.held[spec.key] = ("pending", reason)
                continue
            addresses = [spec.ip for spec in specs if spec.ip]
            if seat.ip not in addresses:
                seat.ip = addresses[0] if addresses else None
            sandbox = seat.name(name)
            if seat.ip is not None and network is not None:
                try:
                    network.attach(sandbox, seat.ip)
                except CcaError as exc:
                    for spec in specs:
                        out.held[spec.key] = ("failed", f"network of group {name} seat {seat.index}: {exc}")
                    continue
            for spec in specs:
                out.run[spec.key] = replace(spec, sandbox=sandbox, ip=seat.ip)

    def _seat(self, name: str, members: list[InstanceSpec]) -> list[Seat]:
        """The group's seats after members that left vacate theirs and new ones sit down."""
        present = {spec.key for spec in members}
        seats = self.seats.setdefault(name, [])
        seated = set()
        for seat in seats:
            seat.members = {s: k for s, k in seat.members.items() if k in present}
            seated.update(seat.members.values())
        for spec in sorted(members, key=_natural):
            if spec.key in seated:
                continue
            seat = next((s for s in seats if spec.service not in s.members), None)
            if seat is None:
                taken = {s.index for s in seats}
                seat = Seat(next(i for i in range(len(seats) + 1) if i not in taken))
                seats.append(seat)
            seat.members[spec.service] = spec.key
        seats[:] = sorted((s for s in seats if s.members), key=lambda s: s.index)
        return seats

    # -- records -------------------------------------------------------------------------------
    def _dump(self) -> str:
        return json.dumps({g: [{"index": s.index, "members": s.members, "ip": s.ip} for s in seats]
                           for g, seats in sorted(self.seats.items())}, sort_keys=True)

    def _load(self) -> dict[str, list[Seat]]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text())
            return {g: [Seat(int(s["index"]), dict(s["members"]), s.get("ip")) for s in seats]
                    for g, seats in data.items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, KeyError) as exc:  # a torn record: pair afresh
            log.warning("ignoring %s: %s", self.path, exc)
            return {}

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(self._dump())
        os.replace(tmp, self.path)
