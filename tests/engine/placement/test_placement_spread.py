"""Zone spread is exact (skew ≤ 1 over the eligible zones) whenever capacity allows, and
`separate` keeps replicas apart whenever enough nodes have room: properties over generated
clusters of up to 200 nodes (hypothesis: 40 generated clusters of 4–200 nodes),
and the cluster issue 11 reported."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ccattler.engine.controllers.instance import InstanceController
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.placement import Cluster, plan
from ccattler.engine.placement.builders import GI, MI, node, service
from ccattler.engine.placement.spread import zone_quotas


def snapshot(facts) -> Snapshot:
    values = dict(facts)
    values.update(InstanceController().reconcile(Snapshot(1, values), 0.0).puts)
    return Snapshot(2, values)


def zone_counts(result, cluster, unit, zones):
    counts = Counter({z: 0 for z in zones})
    for inst in cluster.instances:
        if inst.service == unit and inst.key in result.placements:
            counts[cluster.nodes[result.placements[inst.key]].zone] += 1
    return counts


clusters = st.tuples(
    st.one_of(st.integers(4, 24), st.integers(25, 200)),  # nodes (mostly small)
    st.integers(2, 4),  # zones
    st.lists(st.tuples(st.integers(1, 30), st.booleans()), min_size=1, max_size=8),  # (replicas, ssd only)
    st.integers(0, 2**16),
)


@settings(max_examples=40, deadline=None)
@given(clusters)
def test_zone_spread_is_exact_when_capacity_allows(spec):
    count, zones, specs, seed = spec
    names = [f"z{i}" for i in range(zones)]
    nodes = [node(f"n{i:03d}", 16, 64 * GI, names[(i + seed) % zones],
                  {"disk": "ssd" if (i * 7 + seed) % 3 else "hdd"}) for i in range(count)]
    services = [service(f"s{j}", replicas, 0.1, 64 * MI, zone_spread=True,
                        require=[{"key": "disk", "value": "ssd"}] if ssd else [])
                for j, (replicas, ssd) in enumerate(specs)]
    snap = snapshot(nodes + services)
    cluster = Cluster.from_snapshot(snap)
    result = plan(cluster)
    assert not any(result.unplaced.values())
    for j, (_, ssd) in enumerate(specs):
        eligible = {n.zone for n in cluster.nodes.values() if not ssd or ("disk", "ssd") in n.labels}
        counts = zone_counts(result, cluster, f"default/s{j}", eligible)
        assert max(counts.values()) - min(counts.values()) <= 1, (f"s{j}", counts)
    assert not result.spread_short


def test_a_zone_without_room_is_named():
    nodes = [node("a1", 1, 4 * GI, "a"), node("b1", 8, 32 * GI, "b"), node("b2", 8, 32 * GI, "b")]
    cluster = Cluster.from_snapshot(snapshot(nodes + [service("web", 6, 0.5, 64 * MI, zone_spread=True)]))
    result = plan(cluster)
    assert sum(zone_counts(result, cluster, "default/web", "ab").values()) == 6  # all placed anyway
    assert [(s.zone, s.has, s.room) for s in result.spread_short["default/web"]] == [("a", 2, 2)]


def test_quotas_fill_the_emptiest_zone_first():
    assert zone_quotas(5, {"a": 2}, {"a": 9, "b": 9, "c": 9}) == ({"a": 1, "b": 2, "c": 2}, ())
    quota, short = zone_quotas(6, {}, {"a": 1, "b": 9})
    assert quota == {"a": 1, "b": 5} and short[0].zone == "a"


@settings(max_examples=8, deadline=None)
@given(st.integers(6, 60), st.integers(1, 12), st.integers(1, 12))
def test_separate_keeps_replicas_apart_when_nodes_allow(count, first, second):
    nodes = [node(f"n{i:03d}", 16, 64 * GI, f"z{i % 3}") for i in range(count)]
    db = service("db", first, 0.1, 64 * MI)
    snap = snapshot(nodes + [db])
    placed = plan(Cluster.from_snapshot(snap))
    values = dict(snap.values)
    for inst in Cluster.from_snapshot(snap).instances:
        values[f"derived/placement/{inst.tenant}/{inst.name}"] = {"node": placed.placements[inst.key]}
    values.update(snapshot([service("web", second, 0.1, 64 * MI, separate=["default/db"])]).values)
    cluster = Cluster.from_snapshot(snapshot(values.items()))
    result = plan(cluster)
    db_nodes = {i.node for i in cluster.instances if i.service == "default/db"}
    web_nodes = {name for key, name in result.placements.items() if "/web-" in key}
    assert None not in db_nodes and web_nodes
    if len(db_nodes) < count:  # some node runs no db: web keeps off the db nodes
        assert not (db_nodes & web_nodes), (db_nodes, web_nodes)


def test_explain_names_the_zone_that_lacked_room():
    from ccattler.engine.placement.explain import explain

    nodes = [node("a1", 1, 4 * GI, "a"), node("b1", 8, 32 * GI, "b"), node("b2", 8, 32 * GI, "b")]
    snap = snapshot(nodes + [service("web", 6, 0.5, 64 * MI, zone_spread=True)])
    result = plan(Cluster.from_snapshot(snap))
    values = dict(snap.values)
    for inst in Cluster.from_snapshot(snap).instances:
        values[f"derived/placement/{inst.tenant}/{inst.name}"] = {"node": result.placements[inst.key]}
    out = explain(Snapshot(3, values), "web")
    assert out.to_json()["zones"] == {"a": 2, "b": 4}
    assert out.to_json()["zones_short"] == [{"zone": "a", "replicas": 2, "fullest": 4, "room": 0}]
    assert any("zone a lacks room" in line for line in out.lines())


def test_issue_11_scenario_200_nodes_4_zones_40_spread_services_2000_instances():
    """Issue 11 A1 as reported: 200 nodes in 4 zones, 40 `zone spread` services, 2,000 instances,
    plenty of free capacity (11 of 40 came out 4/3/2/1 or 4/2/2/2). Through the placement
    controller (two chunks of ~1,000 replicas, larger requests first): every service within skew 1
    over the 4 zones, and on none of the nodes of the services it is `separate` from (at most three
    services share a constraint, 150 of the 200 nodes): every odd one from the one before it (the
    same chunk), every s4k+2 from s4k (placed in the chunk before it)."""
    from ccattler.engine.placement.controller import PlacementController

    zones = ("z1", "z2", "z3", "z4")
    nodes = [node(f"n{i:03d}", (8, 16, 32)[i % 3], (8, 16, 32)[i % 3] * 4 * GI, zones[i % 4],
                  {"disk": ("ssd", "hdd")[i % 2]}) for i in range(200)]
    apart = {j: [f"default/s{j - (1 if j % 2 else 2):02d}"] if j % 4 else [] for j in range(40)}
    services = [service(f"s{j:02d}", 50, (0.1, 0.25, 0.5, 1)[j % 4], (128, 256, 512, 1024)[j % 4] * MI,
                        zone_spread=True, separate=apart[j]) for j in range(40)]
    snap = snapshot(nodes + services)
    requested_cpu = sum(doc["instances"] * doc["resources"]["cpu"] for _, doc in services)
    assert requested_cpu < 0.3 * sum(doc["capacity"]["cpu"] for _, doc in nodes)  # a quarter requested
    puts = PlacementController().reconcile(snap, 0.0).puts
    zone_of = {key.rsplit("/", 1)[1]: doc["zone"] for key, doc in nodes}
    where: dict[str, list[str]] = {}
    for doc in puts.values():
        assert doc["node"] is not None, doc
        where.setdefault(doc["service"], []).append(doc["node"])
    assert sorted(where) == [f"default/s{j:02d}" for j in range(40)]
    skewed = {}
    for unit, placed in where.items():
        assert len(placed) == 50, unit
        counts = Counter(zone_of[n] for n in placed)
        if max(counts[z] for z in zones) - min(counts[z] for z in zones) > 1:
            skewed[unit] = dict(counts)
    assert skewed == {}, f"{len(skewed)} of 40 services skewed: {skewed}"
    shared = {(j, other): len(set(where[f"default/s{j:02d}"]) & set(where[other]))
              for j in range(40) for other in apart[j]}
    assert len(shared) == 30
    assert {k: n for k, n in shared.items() if n} == {}, "separated services share nodes"
