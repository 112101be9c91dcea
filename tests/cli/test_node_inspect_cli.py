"""`cca node-inspect NODE --dataplane` as the user sees it: the request asks NodeInspect for the data
plane (kind "dataplane"), the table shows every kind of entry with its counter or its absence, and
`-o json` is the agent's report as it came. The server and agent ends run for real in
tests/agent/e2e/test_tunnel.py and tests/e2e/test_service_dataplane.py."""

from __future__ import annotations

import contextlib
import json

from typer.testing import CliRunner

from ccattler.agent.dataplane.base import Backend, DataPlaneState, Frontend, PolicyIngress
from ccattler.agent.dataplane.inspect import report
from ccattler.agent.dataplane.memory import MemoryDataPlane
from ccattler.cli import top
from ccattler.cli.main import app


class Counted(MemoryDataPlane):
    name = "nftables"

    def counters(self):
        return {"services": {"10.96.0.10:80/tcp": 9}, "external": {}, "refused": 2,
                "dropped": {"shop/db": 5}}


def _reply(monkeypatch, asked: list):
    plane = Counted()
    plane.apply(DataPlaneState(
        services={Frontend("10.96.0.10", 80): (Backend("10.78.1.2", 8080),), Frontend("10.96.0.11", 80): ()},
        identities={"shop/db": frozenset({"10.78.1.4"}), "shop/api": frozenset({"10.78.1.2"})},
        policies={"shop/db": PolicyIngress("shop/db", frozenset({"10.78.1.4"}),
                                           frozenset({("shop/api", 5432, "tcp")}))}))
    answer = {"node": "n1", "observed": {"address": "192.168.1.5"}, "condition": {"condition": "ready"},
              "runtime": {"runtime": "runc", "containers": []}, "dataplane": report(plane, "nftables")}

    class Api:  # the raw call, and the typed method main's client_calls.py has for it
        def json(self, call, request, timeout=None):
            asked.append((call, request.name, request.kind))
            return answer

        def node_inspect(self, node, dataplane=False, timeout=30):
            asked.append(("NodeInspect", node, "dataplane" if dataplane else ""))
            return answer

    monkeypatch.setattr(top, "client", lambda *a: contextlib.nullcontext(Api()))
    return answer


def test_table_shows_entries_counters_and_what_is_not_counted(monkeypatch):
    asked: list = []
    _reply(monkeypatch, asked)
    result = CliRunner().invoke(app, ["node-inspect", "n1", "--dataplane"])
    assert result.exit_code == 0, result.output
    assert asked == [("NodeInspect", "n1", "dataplane")]
    out = result.output
    assert "data plane nftables" in out
    assert "10.96.0.10:80/tcp" in out and "10.78.1.2:8080" in out and " 9" in out
    assert "(none: refused)" in out and "refused (no ready backend): 2" in out
    assert "shop/api" in out and "10.78.1.4" in out and "5432" in out
    assert "backends: not available" in out  # no per-backend counter: said, not 0


def test_json_is_the_report_and_without_the_flag_nothing_is_asked_of_the_plane(monkeypatch):
    asked: list = []
    answer = _reply(monkeypatch, asked)
    result = CliRunner().invoke(app, ["node-inspect", "n1", "--dataplane", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["dataplane"] == answer["dataplane"]
    CliRunner().invoke(app, ["node-inspect", "n1"])
    assert asked[-1] == ("NodeInspect", "n1", "")


def test_explain_connection_with_the_kernel_entries(monkeypatch):
    asked: list = []
    answer = _reply(monkeypatch, asked)
    logic = {"source": "shop/api", "destination": "shop/db", "port": 5432, "protocol": "tcp",
             "verdict": "allowed", "lines": ["shop/api -> shop/db:5432/tcp: allowed", "  allowed by …"]}

    class Api:
        def json(self, call, request, timeout=None):
            asked.append(call)
            return logic if call == "ExplainNetwork" else answer

        def explain_network(self, kind, source, destination, tenant=""):
            return self.json("ExplainNetwork", None)

        def node_inspect(self, node, dataplane=False, timeout=30):
            return self.json("NodeInspect", None)

    monkeypatch.setattr("ccattler.cli.netpolicy.client", lambda *a: contextlib.nullcontext(Api()))
    result = CliRunner().invoke(app, ["explain", "connection", "shop/api", "shop/db:5432/tcp",
                                      "--dataplane", "n1"])
    assert result.exit_code == 0, result.output
    assert asked == ["ExplainNetwork", "NodeInspect"]
    assert "kernel on n1 (nftables): allowed" in result.output and "DIFFERS" not in result.output
    assert "tuple shop/api port 5432/tcp hits -" in result.output  # not in this plane's counters
    assert "guarded here: 10.78.1.4 (dropped 5)" in result.output
    as_json = CliRunner().invoke(app, ["explain", "connection", "shop/api", "shop/db:5432/tcp",
                                       "--dataplane", "n1", "-o", "json"])
    kernel = json.loads(as_json.output)["dataplane"]
    assert kernel["verdict"] == "allowed" and kernel["agrees"] and kernel["node"] == "n1"
    logic["verdict"] = "denied"  # the rules say otherwise: the difference is shown
    differs = CliRunner().invoke(app, ["explain", "connection", "shop/api", "shop/db:5432/tcp",
                                       "--dataplane", "n1"])
    assert "[DIFFERS from the rules]" in differs.output
    wrong = CliRunner().invoke(app, ["explain", "default/web", "--dataplane", "n1"])
    assert wrong.exit_code == 2 and "goes with" in wrong.output
