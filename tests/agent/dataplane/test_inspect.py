"""`cca node-inspect --dataplane`'s report (agent/dataplane/inspect.py) over the in-memory plane and a
plane with counters: entries as programmed, counters beside them, a missing counter said as such."""

from __future__ import annotations

import json

from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend, PolicyIngress
from ccattler.agent.dataplane.inspect import NOT_AVAILABLE, report
from ccattler.agent.dataplane.memory import MemoryDataPlane

STATE = DataPlaneState(
    services={Frontend("10.96.0.10", 80): (Backend("10.78.1.3", 8080, "n1", "web-b"),
                                            Backend("10.78.1.2", 8080, "n1", "web-a")),
              Frontend("10.96.0.12", 53, "udp"): ()},
    external={Frontend("", 443): (Backend("10.78.1.3", 8443),)},
    identities={"shop/db": frozenset({"10.78.1.4"}), "shop/api": frozenset({"10.78.1.2", "10.78.2.9"})},
    policies={"shop/db": PolicyIngress("shop/db", frozenset({"10.78.1.4"}),
                                       frozenset({("shop/api", 5432, "tcp"), ("shop/web", 0, "any")}))})


def test_memory_plane_reports_every_entry_and_no_counter():
    plane = MemoryDataPlane()
    plane.apply(STATE)
    out = report(plane, "memory")
    json.dumps(out)  # JSON-ready
    assert out["plane"] == "memory" and out["error"] is None
    assert out["services"] == [
        {"frontend": "10.96.0.10:80/tcp", "vip": "10.96.0.10", "port": 80, "protocol": "tcp",
         "backends": [{"ip": "10.78.1.2", "port": 8080}, {"ip": "10.78.1.3", "port": 8080}], "hits": None},
        {"frontend": "10.96.0.12:53/udp", "vip": "10.96.0.12", "port": 53, "protocol": "udp",
         "backends": [], "hits": None}]
    assert out["external"] == [{"frontend": "*:443/tcp", "port": 443, "protocol": "tcp",
                                "backends": [{"ip": "10.78.1.3", "port": 8443}], "hits": None}]
    assert out["identities"] == [{"identity": "shop/api", "addresses": ["10.78.1.2", "10.78.2.9"]},
                                 {"identity": "shop/db", "addresses": ["10.78.1.4"]}]
    allowed = [{"source": "shop/api", "port": 5432, "protocol": "tcp", "hits": None},
               {"source": "shop/web", "port": 0, "protocol": "any", "hits": None}]
    assert out["policies"] == [{"identity": "shop/db", "local_addresses": ["10.78.1.4"], "dropped": None,
                                "allowed": allowed}]
    assert all(m.startswith(NOT_AVAILABLE) for m in out["counters"].values()), out["counters"]


class Counted(MemoryDataPlane):
    """The in-memory plane with counters keyed as the kernel planes key theirs."""

    name = "ebpf"

    def counters(self):
        return {"services": {"10.96.0.10:80/tcp": 7, "10.96.0.12:53/udp": 0}, "external": {"*:443/tcp": 2},
                "policy": {"shop/api -> shop/db:5432/tcp": 11}, "dropped": {"shop/db": 3}}


def test_counters_sit_beside_their_entries_and_uncounted_kinds_say_why():
    plane = Counted()
    plane.apply(STATE)
    out = report(plane, "ebpf", error="bpf(): E2BIG")
    assert out["error"] == "bpf(): E2BIG"
    assert [s["hits"] for s in out["services"]] == [7, 0]
    assert out["external"][0]["hits"] == 2
    [policy] = out["policies"]
    assert policy["dropped"] == 3
    assert [t["hits"] for t in policy["allowed"]] == [11, None]  # a tuple the counters do not list
    assert out["refused"] is None and out["counters"]["refused"].startswith(NOT_AVAILABLE)
    assert out["counters"]["backends"].startswith(NOT_AVAILABLE)
    assert not out["counters"]["allowed"].startswith(NOT_AVAILABLE)


def test_nftables_counts_refusals_and_a_table_without_tuple_counters_reads_null():
    class Nft(Counted):
        name = "nftables"

        def counters(self):  # a policy table made before its tuple sets had counters: no "policy"
            return {**super().counters(), "refused": 4, "policy": {}}

    plane = Nft()
    plane.apply(STATE)
    out = report(plane, "nftables")
    assert out["refused"] == 4 and out["policies"][0]["dropped"] == 3
    assert [t["hits"] for t in out["policies"][0]["allowed"]] == [None, None]
    assert not out["counters"]["refused"].startswith(NOT_AVAILABLE)


def test_no_plane_yet_says_why():
    out = report(None, "nftables", note="no subnet yet")
    assert out["plane"] is None and out["note"] == "no subnet yet" and out["services"] == []
    assert all(m.startswith(NOT_AVAILABLE) for m in out["counters"].values())


def test_relied_on_gives_the_kernel_verdict_and_its_entries():
    from ccattler.agent.dataplane.inspect import relied_on

    plane = Counted()
    plane.apply(STATE)
    out = report(plane, "ebpf")
    allowed = relied_on(out, "shop/api", "shop/db", 5432, "tcp")
    assert allowed["verdict"] == "allowed" and allowed["source_addresses"] == ["10.78.1.2", "10.78.2.9"]
    assert allowed["tuples"] == [{"source": "shop/api", "port": 5432, "protocol": "tcp", "hits": 11}]
    assert allowed["destination"] == {"identity": "shop/db", "local_addresses": ["10.78.1.4"], "dropped": 3}
    assert relied_on(out, "shop/api", "shop/db", 80, "tcp")["verdict"] == "denied"  # another port
    assert relied_on(out, "shop/api", "shop/db", 5432, "udp")["verdict"] == "denied"
    # shop/web is allowed on any port and protocol, but no address maps to it on this node
    unknown = relied_on(out, "shop/web", "shop/db", 22, "udp")
    assert unknown["verdict"] == "denied" and "no address" in unknown["why"] and unknown["tuples"]
    # an unguarded destination is open; the VIPs in front of its addresses are the way in
    open_ = relied_on(out, "shop/db", "shop/api", 8080, "tcp")
    assert open_["verdict"] == "allowed" and open_["destination"] is None
    assert [v["frontend"] for v in open_["vips"]] == ["10.96.0.10:80/tcp"]
