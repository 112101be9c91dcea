"""Service names: `derived/dns/<tenant>/<service>` from the VIPs and the stateful ordinals' addresses."""

from __future__ import annotations

from controller_builders import World, node, placement, service

from ccattler.engine.controllers.network import NetworkController


def run(world: World, controller: NetworkController | None = None):
    changes = (controller or NetworkController()).reconcile(world.snapshot(), now=0.0)
    world.apply(changes)
    return changes


def expose(*ports: tuple[int, str]) -> list[dict]:
    return [{"port": p, "protocol": proto, "external": False} for p, proto in ports]


def records(world: World, full: str) -> list[dict]:
    return world.values[f"derived/dns/{full}"]["records"]


def test_a_service_name_answers_its_vip_with_an_srv_record_per_exposed_port():
    world = World(service("web", expose=expose((8080, "tcp"), (53, "udp"))), service("worker"))
    run(world)
    vip = world.values["derived/vip/default/web"]["ip"]
    assert world.values["derived/dns/default/web"] == {
        "service": "default/web", "name": "web.default.cca.local", "ttl": 5, "records": [
            {"name": "web.default.cca.local", "type": "A", "address": vip},
            {"name": "_53._udp.web.default.cca.local", "type": "SRV", "priority": 0, "weight": 100,
             "port": 53, "target": "web.default.cca.local"},
            {"name": "_8080._tcp.web.default.cca.local", "type": "SRV", "priority": 0, "weight": 100,
             "port": 8080, "target": "web.default.cca.local"}]}
    assert "derived/dns/default/worker" not in world.values  # no VIP, not stateful: no name
    assert not run(world)  # settled


def test_stateful_ordinals_get_their_instance_address_under_the_service_name():
    world = World(node("n1"), service("db", tenant="payments", stateful=True, expose=expose((5432, "tcp"))),
                  placement("db-0", "n1", "db", "payments"), placement("db-1", "n1", "db", "payments"))
    run(world)
    ip = {i: world.values[f"derived/network/ip/payments/{i}"]["ip"] for i in ("db-0", "db-1")}
    vip = world.values["derived/vip/payments/db"]["ip"]
    assert [(r["name"], r.get("address")) for r in records(world, "payments/db") if r["type"] == "A"] == [
        ("db.payments.cca.local", vip), ("db-0.db.payments.cca.local", ip["db-0"]),
        ("db-1.db.payments.cca.local", ip["db-1"])]
    # an ordinal that goes loses its name in the same run that frees its address
    world.delete("derived/placement/payments/db-1")
    run(world)
    assert "db-1.db.payments.cca.local" not in {r["name"] for r in records(world, "payments/db")}


def test_a_stateful_service_without_a_vip_is_headless_and_stateless_instances_have_no_names():
    world = World(node("n1"), service("kv", stateful=True), placement("kv-0", "n1", "kv"),
                  placement("kv-1", "n1", "kv"), service("web", expose=expose((80, "tcp"))),
                  placement("web-abcde", "n1", "web"))
    run(world)
    ips = sorted(world.values[f"derived/network/ip/default/{i}"]["ip"] for i in ("kv-0", "kv-1"))
    assert sorted(r["address"] for r in records(world, "default/kv")
                  if r["name"] == "kv.default.cca.local") == ips
    assert [r["name"] for r in records(world, "default/web")] == [
        "web.default.cca.local", "_80._tcp.web.default.cca.local"]


def test_names_follow_the_service_going_and_bad_labels_are_explained_not_served():
    world = World(service("web", expose=expose((80, "tcp"))), service("my_app", expose=expose((80, "tcp"))),
                  service("Web", expose=expose((81, "tcp"))))
    run(world)
    bad = world.values["derived/dns/default/my_app"]
    assert bad["records"] == [] and bad["name"] is None and "not a DNS label" in bad["error"]
    taken = world.values["derived/dns/default/web"]  # "Web" sorts first and keeps web.default.cca.local
    assert taken["records"] == [] and "taken by default/Web" in taken["error"]
    world.delete("desired/service/default/my_app")
    run(world)
    assert "derived/dns/default/my_app" not in world.values


def test_a_fresh_controller_derives_the_same_names():
    world = World(node("n1"), service("db", stateful=True, expose=expose((5432, "tcp"))),
                  placement("db-0", "n1", "db"))
    run(world)
    assert not run(world, NetworkController())
