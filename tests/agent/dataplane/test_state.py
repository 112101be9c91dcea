"""The slice → DataPlaneState builder: VIPs with ready backends, external ports, policy."""

from __future__ import annotations

from ccattler.agent.dataplane.base import Backend, Frontend, PolicyIngress
from ccattler.agent.dataplane.state import dataplane_state


def _vip(ip, *ports):
    return {"service": "x", "ip": ip, "ports": [dict(p) for p in ports]}


def _eps(*entries):
    return {"endpoints": [{"instance": i, "node": n, "ip": ip} for i, n, ip in entries]}


def test_vip_ports_balance_over_ready_endpoints_skipping_null_addresses() -> None:
    facts = {
        "derived/vip/default/web": _vip("10.96.0.1", {"port": 8080, "protocol": "tcp", "external": False},
                                        {"port": 53, "protocol": "udp", "external": False}),
        "derived/endpoint/default/web": _eps(("web-0", "node-1", "10.88.1.2"), ("web-1", "node-2", None),
                                             ("web-2", "node-3", "10.88.3.2")),
    }
    state = dataplane_state(facts, "node-1")
    assert state.services[Frontend("10.96.0.1", 8080, "tcp")] == (
        Backend("10.88.1.2", 8080, "node-1", "web-0"), Backend("10.88.3.2", 8080, "node-3", "web-2"))
    assert [b.port for b in state.services[Frontend("10.96.0.1", 53, "udp")]] == [53, 53]
    assert state.external == {} and state.policies == {}


def test_a_vip_without_endpoints_refuses_and_http_is_tcp() -> None:
    facts = {"derived/vip/t/api": _vip("10.96.0.9", {"port": 443, "protocol": "http", "external": True})}
    state = dataplane_state(facts, "n")
    assert state.services == {Frontend("10.96.0.9", 443, "tcp"): ()}
    assert state.external == {Frontend("", 443, "tcp"): ()}


def test_external_ports_are_node_ports_with_the_same_backends() -> None:
    facts = {"derived/vip/t/gw": _vip("10.96.0.3", {"port": 443, "protocol": "tcp", "external": True}),
             "derived/endpoint/t/gw": _eps(("gw-0", "a", "10.88.0.5"))}
    state = dataplane_state(facts, "a")
    assert state.external[Frontend("", 443, "tcp")] == state.services[Frontend("10.96.0.3", 443, "tcp")]


def test_malformed_documents_contribute_nothing() -> None:
    facts = {"derived/vip/t/a": "junk", "derived/vip/t/b": _vip("not-an-ip", {"port": 1}),
             "derived/vip/t/c": _vip("10.96.0.4", {"port": "80"}, {"port": 81}),
             "derived/endpoint/t/c": {"endpoints": ["junk", {"ip": "bad"}]}}
    state = dataplane_state(facts, "n")
    assert state.services == {Frontend("10.96.0.4", 81, "tcp"): ()}


def test_this_nodes_firewall_document_becomes_identities_and_policies() -> None:
    grant = {"from": "t/a", "port": 80, "protocol": "tcp", "rule": "r1"}
    firewall = {"node": "n1",
                "policies": {"t/b": {"local": ["10.88.0.3"], "named_by": ["r1"], "allowed": [grant]}}}
    facts = {"derived/firewall/n1": firewall, "derived/firewall/n2": {"policies": {"t/x": {}}},
             "derived/identity/t/a": {"identity": "t/a", "addresses": ["10.88.0.2"]},
             "derived/identity/t/b": {"identity": "t/b", "addresses": ["10.88.0.3", "10.88.1.3"]},
             "derived/identity/t/x": {"identity": "t/x", "addresses": ["10.88.9.9"]}}  # not mentioned here
    state = dataplane_state(facts, "n1")
    assert state.identities == {"t/a": frozenset({"10.88.0.2"}), "t/b": frozenset({"10.88.0.3", "10.88.1.3"})}
    assert state.policies == {"t/b": PolicyIngress("t/b", frozenset({"10.88.0.3"}),
                                                   frozenset({("t/a", 80, "tcp")}))}


def test_documents_still_held_as_json_text_are_read_too() -> None:
    import json

    from ccattler.agent.slice_state import SliceFacts

    facts = SliceFacts()
    facts.put_raw("derived/vip/t/w", json.dumps(_vip("10.96.0.2", {"port": 80}) | {"range": "10.96.0.0/16"}))
    facts.put_raw("derived/endpoint/t/w", json.dumps(_eps(("w-0", "n", "10.88.0.9"))))
    state = dataplane_state(facts, "n")
    assert [b.ip for b in state.services[Frontend("10.96.0.2", 80, "tcp")]] == ["10.88.0.9"]
    from ccattler.agent.dataplane.state import service_range

    assert service_range(facts) == "10.96.0.0/16"


def test_the_builder_keeps_unchanged_services_rows_and_follows_changes() -> None:
    from ccattler.agent.dataplane.state import StateBuilder

    facts = {f"derived/vip/t/s{i}": _vip(f"10.96.0.{i}", {"port": 80, "external": i == 1}) for i in (1, 2)}
    facts |= {f"derived/endpoint/t/s{i}": _eps((f"s{i}-a", "n", f"10.88.0.{i}")) for i in (1, 2)}
    builder = StateBuilder()
    first = builder.build(facts, "n")
    assert first == dataplane_state(facts, "n")
    facts["derived/endpoint/t/s2"] = _eps(("s2-b", "n", "10.88.0.9"))  # a new document, as the slice gives
    second = builder.build(dict(facts), "n")
    assert second == dataplane_state(facts, "n")
    one, two = Frontend("10.96.0.1", 80, "tcp"), Frontend("10.96.0.2", 80, "tcp")
    assert second.services[one] is first.services[one]  # unchanged: the same objects
    assert second.services[two] == (Backend("10.88.0.9", 80, "n", "s2-b"),)
    assert second.external == {Frontend("", 80, "tcp"): first.services[one]}
    del facts["derived/vip/t/s1"]
    assert set(builder.build(facts, "n").services) == {two} and builder.build(facts, "n").external == {}


def test_from_the_agents_slice_only_touched_services_are_looked_at_and_the_result_is_the_same() -> None:
    import json

    from ccattler.agent.dataplane.state import StateBuilder
    from ccattler.agent.slice_state import SliceFacts

    facts = SliceFacts()
    for i in range(1, 5):
        vip = _vip(f"10.96.0.{i}", {"port": 80, "external": i == 3})
        facts.put_raw(f"derived/vip/t/s{i}", json.dumps(vip))
        facts.put_raw(f"derived/endpoint/t/s{i}", json.dumps(_eps((f"s{i}-a", "n", f"10.88.0.{i}"))))
    builder = StateBuilder()
    first = builder.build(facts, "n")  # everything, the first time
    assert first == dataplane_state(facts, "n")
    facts.put_raw("derived/endpoint/t/s2", json.dumps(_eps(("s2-b", "n", "10.88.0.9"))))
    facts.discard("derived/vip/t/s4")
    facts.put("derived/vip/t/s5", _vip("10.96.0.5", {"port": 81}))
    second = builder.build(facts, "n")
    assert second == dataplane_state(facts, "n")
    assert list(second.services)[:3] == list(first.services)[:3]  # s1…s3 keep their places
    one = Frontend("10.96.0.1", 80, "tcp")
    assert second.services[one] is first.services[one]
    facts.discard("derived/vip/t/s3")  # the external port goes with it
    third = builder.build(facts, "n")
    assert third == dataplane_state(facts, "n") and third.external == {}
    facts.clear()
    assert builder.build(facts, "n").services == {}


def test_an_unchanged_slice_gives_the_same_state_object_and_the_range_is_kept() -> None:
    import json

    from ccattler.agent.dataplane.state import StateBuilder
    from ccattler.agent.slice_state import SliceFacts

    facts = SliceFacts()
    facts.put_raw("derived/vip/t/a", json.dumps({**_vip("10.96.0.1", {"port": 80}), "range": "10.96.0.0/16"}))
    builder = StateBuilder()
    first = builder.build(facts, "n")
    assert builder.range == "10.96.0.0/16"
    facts.put("observed/node/n", {"address": "192.0.2.1"})  # not a service document
    assert builder.build(facts, "n") is first
    facts.put_raw("derived/endpoint/t/a", json.dumps(_eps(("a-1", "n", "10.88.0.2"))))
    assert builder.build(facts, "n") is not first
