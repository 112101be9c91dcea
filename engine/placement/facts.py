"""Typed input facts of rules/placement.lp from a `Cluster` (see the contract at the top of it).

Nodes with the same shape (zone, architecture, labels, restrictions) share one class: only the
class representative carries those facts, so the static filter is grounded units × classes,
not units × nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from clingo import Symbol

from ccattler.engine.placement.model import Cluster, Node, Service
from ccattler.engine.solve.symbols import atom


def node_classes(nodes: Iterable[Node]) -> dict[str, str]:
    """node → its class representative (the first node, by name, of its shape)."""
    first: dict[tuple[object, ...], str] = {}
    classes = {}
    for node in sorted(nodes, key=lambda n: n.name):
        classes[node.name] = first.setdefault(node.shape, node.name)
    return classes


def node_facts(nodes: Mapping[str, Node], classes: Mapping[str, str]) -> list[Symbol]:
    """The facts of the nodes themselves (usage apart): the same for every round of a plan, and
    for every tick while the nodes do not change (cached)."""
    key = tuple(sorted(nodes.items()))
    ident = (key, tuple(sorted(classes.items())))
    cached = _NODE_CACHE.get(ident)
    if cached is None:
        _NODE_CACHE.clear()  # keep one cluster's worth
        cached = _NODE_CACHE[ident] = _node_facts(nodes, classes)
    return cached


_NODE_CACHE: dict[tuple[object, ...], list[Symbol]] = {}


def _node_facts(nodes: Mapping[str, Node], classes: Mapping[str, str]) -> list[Symbol]:
    facts = []
    for name in sorted(nodes):
        node = nodes[name]
        facts.append(atom("node", name))
        facts.append(atom("node_cap", name, node.cpu, node.mem))
        if node.condition != "ready":
            facts.append(atom("node_unready", name, node.condition))
        rep = classes[name]
        facts.append(atom("node_class", name, rep))
        if rep != name:
            continue
        if node.zone is not None:
            facts.append(atom("node_zone", name, node.zone))
        if node.arch is not None:
            facts.append(atom("node_arch", name, node.arch))
        facts.extend(atom("node_label", name, key, value) for key, value in node.labels)
        facts.extend(atom("node_restrict", name, key) for key in node.restrictions)
    return facts


def usage_facts(used: Mapping[str, tuple[int, int]]) -> Iterator[Symbol]:
    for name in sorted(used):
        yield atom("node_used", name, *used[name])


def service_facts(service: Service) -> Iterator[Symbol]:
    s = service.name
    yield atom("service", s, service.cpu, service.mem)
    if service.group:
        yield atom("group_member", service.unit, s)
    for key, value in service.require:
        yield atom("require", s, key, value)
    for key in service.accept:
        yield atom("accept", s, key)
    if service.zone is not None:
        yield atom("pin_zone", s, service.zone)
    if service.arch is not None:
        yield atom("pin_arch", s, service.arch)
    if service.spread:
        yield atom("zone_spread", s)
    for key, value, weight in service.prefer:
        yield atom("prefer", s, key, value, weight)
    for target in service.colocate:
        yield atom("colocate", s, target)
    for target in service.separate:
        yield atom("separate", s, target)


def relevant_services(cluster: Cluster, units: Iterable[str], members: Mapping[str, list[str]]) -> list[str]:
    """The services of `units` plus every service their colocate/separate rules name (with the
    other members of that service's unit, so the program can find where it runs)."""
    names = {s for u in units for s in members.get(u, ())}
    for name in list(names):
        service = cluster.services[name]
        for target in (*service.colocate, *service.separate):
            if target in cluster.services:
                names.update(members[cluster.services[target].unit])
    return sorted(names)


def work_facts(
    cluster: Cluster,
    members: Mapping[str, list[str]],
    pending: Mapping[str, int],
    placed: Mapping[tuple[str, str], int],
    used: Mapping[str, tuple[int, int]],
    explain: Iterable[str] = (),
    nodes: list[Symbol] | None = None,
) -> tuple[list[Symbol], set[str]]:
    """All facts of one run, and the units they mention; `nodes` are the `node_facts` if known."""
    explain = list(explain)
    if nodes is None:
        nodes = node_facts(cluster.nodes, node_classes(cluster.nodes.values()))
    facts = [*nodes, *usage_facts(used)]
    services = relevant_services(cluster, [*pending, *explain], members)
    for name in services:
        facts.extend(service_facts(cluster.services[name]))
    units = {cluster.services[name].unit for name in services}
    for unit in sorted(pending):
        facts.append(atom("pending", unit, pending[unit]))
    for (unit, node), count in sorted(placed.items()):
        if unit in units and count > 0:
            facts.append(atom("placed", unit, node, count))
    facts.extend(atom("explain", unit) for unit in explain)
    return facts, units
