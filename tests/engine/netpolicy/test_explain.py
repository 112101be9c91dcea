"""`explain connection|service` over a snapshot's values: verdicts come from rules/netpolicy.lp."""

from __future__ import annotations

import pytest

from ccattler.engine.facts.errors import InvalidValue
from ccattler.engine.netpolicy import explain_connection, explain_service, parse_endpoint

VALUES = {
    "desired/service/frontend/web": {"expose": []},
    "desired/service/payments/checkout": {"expose": []},
    "desired/service/payments/database": {"expose": [{"port": 5432, "protocol": "tcp"}]},
    "desired/network/payments/aa": {"action": "allow", "from": "payments/checkout", "to": "payments/database",
                                    "port": 5432, "protocol": None, "source": "shop.cca"},
    "desired/network/payments/bb": {"action": "deny", "from": "frontend/web", "to": "payments/database",
                                    "port": None, "protocol": None},
}


def test_parse_endpoint():
    assert parse_endpoint("payments/database:5432/tcp") == ("payments/database", 5432, "tcp")
    assert parse_endpoint("web", "frontend") == ("frontend/web", 0, "tcp")
    assert parse_endpoint("a/b:53/udp") == ("a/b", 53, "udp")
    with pytest.raises(InvalidValue, match="not an identity"):
        parse_endpoint("a/b:x")


def test_verdicts_name_the_deciding_rule():
    denied = explain_connection(VALUES, "frontend/web", "payments/database", 5432, "tcp")
    assert denied["verdict"] == "denied" and denied["code"] == "denied_by_rule" and denied["rules"] == ["bb"]
    allowed = explain_connection(VALUES, "payments/checkout", "payments/database", 5432, "tcp")
    assert allowed["verdict"] == "allowed" and allowed["rules"] == ["aa"]
    default = explain_connection(VALUES, "payments/checkout", "payments/database", 80, "tcp")
    assert default["code"] == "default_deny"
    assert "default deny: payments/database is named by rule aa" in default["lines"][1]
    open_ = explain_connection(VALUES, "payments/database", "frontend/web", 80, "tcp")
    assert open_["verdict"] == "allowed" and open_["code"] == "open"


def test_explain_service_and_unknown_identity():
    answer = explain_service(VALUES, "payments/database")
    assert not answer["open"] and answer["allowed"] == [
        {"from": "payments/checkout", "port": 5432, "protocol": "any", "rule": "aa"}]
    assert explain_service(VALUES, "frontend/web")["open"]
    with pytest.raises(InvalidValue, match="no service 'x/y'"):
        explain_connection(VALUES, "x/y", "frontend/web", 80, "tcp")
