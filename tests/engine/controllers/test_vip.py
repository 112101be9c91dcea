"""Service VIPs: one stable address per service that exposes a port, kept across restarts."""

from __future__ import annotations

import pytest
from controller_builders import World, service

from ccattler.engine.controllers.network import NetworkController
from ccattler.engine.controllers.vip import InvalidServiceRange, VipAllocator


def web(name: str, *ports: int, tenant: str = "default", external: bool = False):
    return service(name, tenant, expose=[{"port": p, "protocol": "tcp", "external": external} for p in ports])


def run(world: World, controller: NetworkController | None = None):
    changes = (controller or NetworkController()).reconcile(world.snapshot(), now=0.0)
    world.apply(changes)
    return changes


def vip(world: World, name: str, tenant: str = "default") -> str | None:
    doc = world.values.get(f"derived/vip/{tenant}/{name}")
    return doc and doc["ip"]


def test_exposing_services_get_addresses_in_name_order_with_their_dns_name_and_ports():
    world = World(web("web", 8080), web("api", 443, external=True), service("worker"),
                  web("db", 5432, tenant="payments"))
    run(world)
    assert vip(world, "api") == "10.96.0.1" and vip(world, "web") == "10.96.0.2"
    assert vip(world, "db", "payments") == "10.96.0.3"  # payments/db sorts after default/*
    assert vip(world, "worker") is None  # exposes nothing
    assert world.values["derived/vip/default/api"] == {
        "service": "default/api", "ip": "10.96.0.1", "range": "10.96.0.0/16",
        "dns": "api.default.cca.local", "ports": [{"port": 443, "protocol": "tcp", "external": True}]}
    assert not run(world)


def test_addresses_are_stable_across_new_services_and_a_fresh_controller():
    world = World(web("m", 80), web("z", 80))
    run(world)
    world.put(*web("a", 80))  # sorts first, takes the lowest *free* address
    run(world, NetworkController())  # a new leader: allocation is a function of the snapshot
    assert (vip(world, "m"), vip(world, "z"), vip(world, "a")) == ("10.96.0.1", "10.96.0.2", "10.96.0.3")
    assert not run(world, NetworkController())


def test_released_when_the_service_goes_or_stops_exposing_and_reused_later():
    world = World(web("a", 80), web("b", 80))
    run(world)
    world.delete("desired/service/default/a")
    world.put(*service("b"))  # no longer exposes anything
    run(world)
    assert world.under("derived/vip/") == {}
    world.put(*web("c", 80))
    run(world)
    assert vip(world, "c") == "10.96.0.1"


def test_duplicates_and_addresses_outside_the_range_are_reallocated():
    world = World(web("a", 80), web("b", 80), web("c", 80))
    world.put("derived/vip/default/a", {"ip": "10.96.0.7"})
    world.put("derived/vip/default/b", {"ip": "10.96.0.7"})  # a duplicate: the first name keeps it
    world.put("derived/vip/default/c", {"ip": "192.0.2.9"})
    run(world)
    assert (vip(world, "a"), vip(world, "b"), vip(world, "c")) == ("10.96.0.7", "10.96.0.1", "10.96.0.2")


def test_port_changes_rewrite_the_document_but_keep_the_address():
    world = World(web("a", 80))
    run(world)
    world.put(*web("a", 80, 443))
    run(world)
    doc = world.values["derived/vip/default/a"]
    assert doc["ip"] == "10.96.0.1" and [p["port"] for p in doc["ports"]] == [80, 443]


def test_a_configured_range_and_a_full_range():
    world = World(web("a", 80), web("b", 80), web("c", 80))
    run(world, NetworkController(service_cidr="10.200.0.0/30"))  # two usable addresses
    assert (vip(world, "a"), vip(world, "b"), vip(world, "c")) == ("10.200.0.1", "10.200.0.2", None)


@pytest.mark.parametrize("cidr, message", [
    pytest.param("nonsense", "not an IPv4 network", id="garbage"),
    pytest.param("10.88.128.0/20", "overlaps the cluster CIDR", id="overlap"),
    pytest.param("10.96.0.0/31", "too small", id="tiny"),
])
def test_bad_ranges_are_refused_clearly(cidr, message):
    with pytest.raises(InvalidServiceRange, match=message):
        VipAllocator(cidr, "10.88.0.0/16")


def test_a_service_scaled_on_requests_per_second_has_its_connections_counted():
    scaled = web("web", 8080)
    scaled[1]["scale"] = {"horizontal": {"min": 1, "max": 5, "targets": [
        {"metric": "requests_per_second", "value": 100}]}}
    world = World(scaled, web("api", 443))
    run(world)
    assert world.values["derived/vip/default/web"]["count"] == "requests_per_second"
    assert "count" not in world.values["derived/vip/default/api"]
