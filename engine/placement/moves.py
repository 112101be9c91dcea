"""Moves the disruption controller asks for (`derived/disruption/<tenant>/<service>` → `move`):
`{instance: node}` re-places a running instance on that node (a rebalancing move the placement
program chose) when the node is still ready and has room; `{instance: null}` places it again
anywhere (a stateful instance leaving a drained node), and keeps it where it is when nothing fits.
The members of a service group asked to move from one node to another (a seat, or several) move
together or not at all: only when every member has as many of them as the others and the target
has room for all — members sharing a network namespace are never split across nodes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from ccattler.engine.facts.keys import DISRUPTIONS
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.placement.model import Cluster, Instance


@dataclass(slots=True)
class Applied:
    """What the moves changed in the cluster: instance key → (from, to) for moves to a node, and
    the keys placed again from scratch (their old node kept when the plan finds none)."""

    moved: dict[str, tuple[str, str]] = field(default_factory=dict)
    replace: dict[str, str] = field(default_factory=dict)  # key → node it leaves
    together: list[frozenset[str]] = field(default_factory=list)  # keys of a group's seats moved as one


def requested(snapshot: Snapshot) -> dict[tuple[str, str], str | None]:
    """(tenant, instance) → target node (None: anywhere)."""
    out: dict[tuple[str, str], str | None] = {}
    for key, doc in snapshot.values.items():
        if not key.startswith(DISRUPTIONS) or not isinstance(doc, Mapping):
            continue
        tenant = key[len(DISRUPTIONS):].split("/", 1)[0]
        for name, node in (doc.get("move") or {}).items():
            if node is None or isinstance(node, str):
                out[tenant, str(name)] = node
    return out


def apply_moves(cluster: Cluster, moves: Mapping[tuple[str, str], str | None]) -> Applied:
    """Rewrite `cluster.instances` for the moves that can happen now."""
    applied = Applied()
    if not moves:
        return applied
    used: dict[str, list[int]] = {}
    for inst in cluster.instances:
        if inst.node is not None:
            u = used.setdefault(inst.node, [0, 0])
            u[0] += inst.cpu
            u[1] += inst.mem
    out: list[Instance] = []
    #: What moves as one: a solo instance by its key, a group's instances by (unit, from, to).
    batches: dict[tuple[str, ...], list[int]] = {}
    for inst in cluster.instances:
        wanted = (inst.tenant, inst.name)
        if inst.node is None or wanted not in moves or moves[wanted] == inst.node:
            out.append(inst)
            continue
        target = moves[wanted]
        here = cluster.nodes.get(inst.node)
        if target is None and here is not None and here.condition == "ready":
            out.append(inst)  # it has left the drained node already
            continue
        if target is None:
            applied.replace[inst.key] = inst.node
            out.append(dataclasses.replace(inst, node=None))
            continue
        service = cluster.services.get(inst.service)
        batch = (service.unit, inst.node, target) if service is not None and service.group else (inst.key,)
        batches.setdefault(batch, []).append(len(out))
        out.append(inst)
    members = cluster.units()
    for batch, positions in batches.items():
        insts = [out[i] for i in positions]
        target = str(moves[insts[0].tenant, insts[0].name])
        if len(batch) == 3 and not _whole_seats(insts, members.get(batch[0], ())):
            continue  # moving part of a seat would split the group: everything stays
        cpu, mem = sum(i.cpu for i in insts), sum(i.mem for i in insts)
        node = cluster.nodes.get(target)
        free = used.setdefault(target, [0, 0])
        if node is None or node.condition != "ready" or free[0] + cpu > node.cpu or free[1] + mem > node.mem:
            continue  # no longer possible: stays
        free[0] += cpu
        free[1] += mem
        for i, inst in zip(positions, insts, strict=True):
            used[str(inst.node)][0] -= inst.cpu
            used[str(inst.node)][1] -= inst.mem
            applied.moved[inst.key] = (str(inst.node), target)
            out[i] = dataclasses.replace(inst, node=target)
        if len(batch) == 3:
            applied.together.append(frozenset(i.key for i in insts))
    cluster.instances = out
    return applied


def _whole_seats(insts: list[Instance], members: list[str] | tuple[str, ...]) -> bool:
    """Every member of the group has the same number of instances in the batch."""
    counts = Counter(i.service for i in insts)
    return bool(members) and set(counts) == set(members) and len(set(counts.values())) == 1
