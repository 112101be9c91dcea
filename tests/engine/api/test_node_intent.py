"""`NodeIntent` (cca drain / disable-node / enable-node): the intent is its own key, written by the
API server with who asked, audited, shown by Get nodes, and no apply of a file prunes it."""

from __future__ import annotations

import grpc
import pytest

from ccattler.dsl.sources import Source
from ccattler.engine.api.client import ApiError
from ccattler.engine.api.gen.ccattler.v1 import api_pb2

NODE_FILE = "node n1 { zone a  capacity { cpu 8  memory 32Gi } }\n"


def intent(client, node, what):
    return client.json("NodeIntent", api_pb2.NodeIntentRequest(node=node, intent=what))


def test_drain_writes_the_intent_key_and_an_apply_never_prunes_it(cluster):
    with cluster.client() as client:
        client.apply([Source("nodes.cca", NODE_FILE)])
        result = intent(client, "n1", "drain")
        assert result["key"] == "intent/node/n1"
        doc = cluster.store.get("intent/node/n1").value
        assert doc["intent"] == "drain" and doc["by"].endswith("admin")
        # the file that declares the node is applied again, and then without the node at all
        client.apply([Source("nodes.cca", NODE_FILE.replace("cpu 8", "cpu 4"))])
        client.apply([Source("nodes.cca", "")])
        assert cluster.store.get("intent/node/n1").value["intent"] == "drain"
        assert cluster.store.get("desired/node/n1") is None  # the declaration was pruned, not the intent
        audit = client.json("Audit", api_pb2.AuditRequest(limit=20))
        assert any("drain node n1" in str(record) for record in audit["items"]), audit
        intent(client, "n1", "enable")
        assert cluster.store.get("intent/node/n1") is None


def test_get_nodes_shows_the_intent_and_what_a_drain_waits_for(cluster):
    cluster.store.put("observed/node/n2", {"capacity": {"cpu": 1000, "memory": 1 << 30}})
    cluster.store.put("derived/node/n2", {"condition": "draining", "since": 1})
    blocked = [{"group": "default/g", "members": ["default/a", "default/b"], "from": "n2",
                "code": "member_budget", "args": {"service": "default/b", "floor": 2, "ready": 2}}]
    cluster.store.put("derived/drain/n2", {"node": "n2", "instances": 1, "waits": ["web floor 2"],
                                           "moving": [], "blocked": blocked})
    with cluster.client() as client:
        intent(client, "n2", "disable")
        (row,) = client.get("nodes", "n2")["items"]
    assert row["intent"] == "disable" and row["waits"] == ["web floor 2"] and row["condition"] == "draining"
    assert row["blocked"] == blocked  # a group's reasons as codes, for `-o json` readers
    from ccattler.cli.render import node_condition
    assert node_condition(row) == "draining (waits: web floor 2)"


@pytest.mark.parametrize(("node", "what", "code", "says"), [
    ("n1", "evict", grpc.StatusCode.INVALID_ARGUMENT, "expected one of drain, disable, enable"),
    ("a/b", "drain", grpc.StatusCode.INVALID_ARGUMENT, "node"),
    ("ghost", "drain", grpc.StatusCode.NOT_FOUND, "not known"),
])
def test_wrong_intents_are_refused_and_change_nothing(cluster, node, what, code, says):
    cluster.store.put("observed/node/n1", {"capacity": {"cpu": 1000, "memory": 1 << 30}})
    with cluster.client() as client, pytest.raises(ApiError) as err:
        intent(client, node, what)
    assert err.value.code == code and says in str(err.value), err.value
    assert cluster.store.range("intent/")[0] == []
