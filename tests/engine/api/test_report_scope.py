"""Issue 12 class 5: a node reports only instances placed on it (and its own metric samples):
`check_report` over a view, then the same over real mutual TLS, where a refusal is
PERMISSION_DENIED, writes nothing and is audited."""

from __future__ import annotations

import json

import grpc
import pytest

from ccattler.engine.admission.capabilities import OBJECT_CAPABILITY_KIND
from ccattler.engine.api.client import ApiError
from ccattler.engine.api.errors import BadRequest, Forbidden
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.report_scope import ReportView, check_report
from ccattler.engine.facts.keys import PREFIX_OWNERS
from ccattler.engine.facts.read_guards import READ_GUARDS, ReadGuard, prefix_guard, read_guard
from tests.engine.api.test_agent_calls import join

INST = "observed/instance/t/web-1"
METRIC = "observed/metric/t/web/rps/n1"
VIEW = ReportView(current={}, placed={"t/web-1": "n1"}, declared=frozenset({"t/web"}))


def view(placed=None, current=None, declared=()):
    return ReportView(current or {}, {"t/web-1": placed} if placed else {}, frozenset(declared))


@pytest.mark.parametrize(("key", "value", "v"), [
    pytest.param(INST, {"node": "n1"}, view("n1"), id="placed-here-new"),
    pytest.param(INST, {"node": "n1"}, view("n2", {INST: {"node": "n1"}}), id="moved-away-own-doc"),
    pytest.param(INST, {"node": "n1"}, view(None, {INST: {"node": "n1"}}), id="service-gone-own-doc"),
    pytest.param(INST, {"node": "n1"}, view("n1", {INST: {"node": "n2"}}), id="moved-here-from-lost-node"),
    pytest.param(INST, None, view(None), id="delete-nothing"),
    pytest.param(INST, None, view("n2", {INST: {"node": "n1"}}), id="delete-own-doc"),
    pytest.param(METRIC, {"value": 1}, view(declared={"t/web"}), id="metric-of-a-declared-service"),
    pytest.param(METRIC, None, view(), id="delete-own-metric"),
])
def test_allowed_reports(key, value, v):
    check_report("n1", key, value, v)


@pytest.mark.parametrize(("key", "value", "v", "says"), [
    pytest.param(INST, {"node": "n1"}, view(None), "not placed on any node", id="create-unplaced"),
    pytest.param(INST, {"node": "n1"}, view("n2"), "placed on n2", id="create-placed-elsewhere"),
    pytest.param(INST, {"node": "n2"}, view("n1"), "names node 'n2'", id="claims-another-node"),
    pytest.param(INST, {"node": "n1"}, view("n2", {INST: {"node": "n2"}}), "placed on n2",
                 id="overwrite-other"),
    pytest.param(INST, None, view("n2", {INST: {"node": "n2"}}), "placed on n2", id="delete-other"),
    pytest.param(INST, {"state": "running"}, view("n1"), "names node None", id="no-node-field"),
    pytest.param(METRIC, {"value": 1}, view(), "service t/web is not declared", id="metric-undeclared"),
    pytest.param("observed/metric/t/web/rps/n2", {"value": 1}, VIEW, "only its own",
                 id="metric-other-source"),
    pytest.param("observed/metric/web/rps/n1", {"value": 1}, VIEW, "only its own", id="metric-no-tenant"),
    pytest.param("observed/node/n2", {}, VIEW, "only its own", id="other-node-doc"),
    pytest.param("observed/instance/t/web-1/x", {"node": "n1"}, VIEW, "only its own", id="deeper-key"),
    pytest.param("derived/placement/t/web-1", {"node": "n1"}, VIEW, "only its own", id="derived"),
    pytest.param("desired/service/t/web", {}, VIEW, "only its own", id="desired"),
])
def test_refused_reports(key, value, v, says):
    with pytest.raises(Forbidden) as err:
        check_report("n1", key, value, v)
    assert says in str(err.value) and "n1" in str(err.value)


def test_own_node_document_goes_through_register_node():
    with pytest.raises(BadRequest, match="RegisterNode"):
        check_report("n1", "observed/node/n1", {}, VIEW)
    with pytest.raises(BadRequest, match="not a valid name"):
        check_report("n1", "observed/instance/t/..", {"node": "n1"}, VIEW)


def test_every_prefix_has_one_read_guard_agreeing_with_admission():
    for kind, capability in OBJECT_CAPABILITY_KIND.items():
        assert READ_GUARDS[f"desired/{kind}/"][0] == capability, kind
    for prefix in PREFIX_OWNERS:  # every written prefix is guarded by name, none falls to "admin only"
        assert any(prefix.startswith(g) or g.startswith(prefix) for g in READ_GUARDS), prefix
    assert read_guard("derived/instance/b/pay/pay-1") == ReadGuard("service", "b")
    assert read_guard("derived/network/ip/b/pay-1") == ReadGuard("service", "b")
    assert read_guard("secret/b/k") == ReadGuard("cluster", None)
    assert read_guard("auth/token/x") == ReadGuard("cluster", None)
    assert read_guard("nothing/known") == ReadGuard("cluster", None)
    assert prefix_guard("desired/service/b/") == ReadGuard("service", "b")
    assert prefix_guard("desired/service/b") is None  # also `b2`'s keys: judged one by one
    assert prefix_guard("derived/re") is None  # rollout (per tenant) and rebalance (node)
    assert prefix_guard("audit/") == ReadGuard("audit", None)


def observation(key, value):
    return api_pb2.Observation(key=key, value_json="" if value is None else json.dumps(value))


def test_a_node_cannot_report_another_nodes_instance(cluster, tmp_path):
    cluster.store.txn((), [
        ("desired/service/t/web", {"kind": "service", "tenant": "t", "name": "web"}),
        ("derived/placement/t/web-1", {"service": "t/web", "instance": "web-1", "node": "n2"}),
        ("derived/placement/t/web-2", {"service": "t/web", "instance": "web-2", "node": "n1"}),
        ("observed/instance/t/web-3", {"node": "n2", "state": "running"}),
    ], ())
    client, _ = join(cluster, tmp_path, "n1")
    revision = cluster.store.revision()
    mine = observation("observed/instance/t/web-2", {"node": "n1", "state": "running"})
    with client:
        for other in (observation("observed/instance/t/web-1", {"node": "n1", "state": "running"}),
                      observation("observed/instance/t/web-3", {"node": "n1", "state": "failed"}),
                      observation("observed/instance/t/web-3", None),
                      observation("observed/instance/u/never-placed", {"node": "n1"}),
                      observation("observed/metric/t/api/rps/n1", {"value": 1})):  # not declared
            with pytest.raises(ApiError) as err:
                client.unary(client.agent, "Report", api_pb2.ReportRequest(observations=[mine, other]))
            assert err.value.code == grpc.StatusCode.PERMISSION_DENIED, err.value
            assert "n1 may not report" in str(err.value)
        changed = [f.key for f in cluster.store.range("")[0] if f.mod_revision > revision]
        assert changed and all(k.startswith("audit/") for k in changed)  # nothing half-applied
        denials = [f.value for f in cluster.store.range("audit/")[0] if f.value.get("verb") == "Report"]
        assert len(denials) == 5 and {d["decision"] for d in denials} == {"denied"}
        assert all(d["principal"] == "n1" for d in denials), denials
        client.unary(client.agent, "Report", api_pb2.ReportRequest(observations=[
            mine, observation("observed/metric/t/web/rps/n1", {"value": 2})]))
    assert cluster.store.get("observed/instance/t/web-2").value["state"] == "running"
    assert cluster.store.get("observed/instance/t/web-3").value["node"] == "n2"


def test_the_guard_lookup_is_the_longest_prefix():
    import itertools

    from ccattler.engine.facts.read_guards import _guard_prefix

    def longest(key):
        return max((p for p in READ_GUARDS if key.startswith(p)), key=len, default=None)

    segments = ["desired", "derived", "observed", "secret", "auth", "network", "ip", "service", "rebalance",
                "re", "node", "a", ""]
    for size in (1, 2, 3, 4):
        for combo in itertools.product(segments, repeat=size):
            for key in ("/".join(combo), "/".join(combo) + "/"):
                assert _guard_prefix(key) == longest(key), key
