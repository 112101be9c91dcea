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


def test_diff_prints_connections_a_change_opens_or_closes(cli_cluster, tmp_path):
    (tmp_path / "shop.cca").write_text(SHOP)
    assert cli_cluster.cca("apply", str(tmp_path / "shop.cca")).exit_code == 0
    changed = SHOP.replace("    deny frontend/web -> payments/database\n",
                           "    allow frontend/web -> payments/database port 5432 tcp\n")
    (tmp_path / "shop.cca").write_text(changed)
    diff = cli_cluster.cca("diff", str(tmp_path / "shop.cca"))
    assert diff.exit_code == 0, diff.output
    assert "+ connection frontend/web -> payments/database:5432/tcp" in diff.output
    wide = SHOP.replace("    deny frontend/web -> payments/database\n", "")
    wide = wide.replace("payments/database port 5432", "payments/checkout port 443")
    (tmp_path / "shop.cca").write_text(wide)
    diff = cli_cluster.cca("diff", str(tmp_path / "shop.cca"), "-o", "json")
    connections = json.loads(diff.output)["connections"]
    assert {"from": "*", "to": "payments/database", "port": 0, "protocol": "any"} in connections["opened"]
    assert connections["closed"][0]["to"] == "payments/checkout"


def test_plan_shows_the_policy_effect(tmp_path):
    from typer.testing import CliRunner

    from ccattler.cli.main import app

    (tmp_path / "shop.cca").write_text(SHOP + "node n1 { capacity { cpu 8  memory 16Gi } }\n")
    result = CliRunner().invoke(app, ["plan", str(tmp_path / "shop.cca")])
    assert result.exit_code == 0, result.output
    assert "payments/database: default deny; allows payments/checkout:5432/any" in result.output


ISOLATION = """% no tenant reaches another tenant's services unless listed here (target, source)
export("payments", "ops").
policy_deny("tenant-isolation", S, D) :- says(allow, D, S, _, _, _), identity(S, TS), identity(D, TD),
    TS != TD, not export(TD, TS).
"""


def test_policy_apply_netpolicy_extension(cli_cluster, tmp_path):
    shop = SHOP.replace("network {\n", "network {\n    allow * -> payments/checkout port 443\n")
    (tmp_path / "shop.cca").write_text(shop)
    assert cli_cluster.cca("apply", str(tmp_path / "shop.cca")).exit_code == 0
    before = cli_cluster.cca("explain", "connection", "frontend/web", "payments/checkout:443")
    assert "allowed" in before.output
    (tmp_path / "iso.lp").write_text(ISOLATION)
    applied = cli_cluster.cca("policy", "apply", str(tmp_path / "iso.lp"), "--program", "netpolicy")
    assert applied.exit_code == 0, applied.output
    after = cli_cluster.cca("explain", "connection", "frontend/web", "payments/checkout:443")
    assert "denied" in after.output and "tenant-isolation" in after.output
    # admission ignores it: applying services still works
    assert cli_cluster.cca("apply", str(tmp_path / "shop.cca")).exit_code == 0
    (tmp_path / "bad.lp").write_text('policy_deny("x", S, D) :- servce(S), identity(D, _).\n')
    bad = cli_cluster.cca("policy", "apply", str(tmp_path / "bad.lp"), "--program", "netpolicy")
    assert bad.exit_code == 1 and "bad.lp:1" in bad.output and "unknown predicate servce/1" in bad.output
