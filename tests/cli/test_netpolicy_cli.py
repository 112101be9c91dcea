"""`cca explain connection|service` against a live server (rules/netpolicy.lp through the API)."""

from __future__ import annotations

import json

SHOP = """
service frontend/web { image nginx:1.27 }
service payments/checkout { image nginx:1.27  expose 443 }
service payments/database { image postgres:16  expose 5432 }
network {
    allow payments/checkout -> payments/database port 5432
    deny frontend/web -> payments/database
}
"""


def test_explain_connection_and_service(cli_cluster, tmp_path):
    (tmp_path / "shop.cca").write_text(SHOP)
    applied = cli_cluster.cca("apply", str(tmp_path / "shop.cca"))
    assert applied.exit_code == 0, applied.output
    denied = cli_cluster.cca("explain", "connection", "frontend/web", "payments/database:5432/tcp")
    assert denied.exit_code == 0, denied.output
    assert "denied" in denied.output and "deny frontend/web -> payments/database" in denied.output
    allowed = cli_cluster.cca("explain", "connection", "payments/checkout", "payments/database:5432/tcp",
                              "-o", "json")
    assert json.loads(allowed.output)["verdict"] == "allowed"
    default = cli_cluster.cca("explain", "connection", "payments/checkout", "payments/database:22")
    assert "default deny: payments/database is named by rule" in default.output
    service = cli_cluster.cca("explain", "service", "payments/database")
    assert "allow payments/checkout port 5432/any" in service.output
    bad = cli_cluster.cca("explain", "connection", "frontend/web", "nowhere/x:80")
    assert bad.exit_code == 1 and "no service 'nowhere/x'" in bad.output
