"""Issue 5's "Done when" scenario through the CLI against a live server: apply shop.cca, get and
describe, change and diff, prune on re-apply, a secret never stored in plaintext, team isolation for
a bearer-token user, and an operator policy forbidding `latest` tags."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

NO_LATEST = """\
deny(latest_tag, (S, T)) :- service(S), image_tag(S, T), T == "latest".
message(latest_tag, "service {0} uses the mutable tag {1}; pin a version").
"""

GRANTS = """\
grant developer to user alice
"""


def _shop(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(EXAMPLES / "shop.cca", work / "shop.cca")
    return work / "shop.cca"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def run_scenario(cluster, tmp_path):
    shop = _shop(tmp_path)
    result = cluster.cca("apply", str(shop))
    assert result.exit_code == 0, result.output
    assert "service frontend/web created" in result.output
    assert "service payments/checkout created" in result.output

    listed = cluster.cca("get", "services", "-A")
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines()[0].split()[:3] == ["NAME", "READY", "IMAGE"]
    assert "frontend/web" in listed.output and "payments/database" in listed.output
    tagged = cluster.cca("get", "services", "-A", "--tag", "team=storefront", "-o", "json")
    assert [s["name"] for s in json.loads(tagged.output)] == ["web"]
    described = cluster.cca("describe", "service", "frontend/web")
    assert described.exit_code == 0 and "registry.local:5000/shop/web:1.4" in described.output

    _edit(shop, "instances 3", "instances 5")
    diff = cluster.cca("diff", str(shop))
    assert diff.exit_code == 0, diff.output
    assert "~ service frontend/web" in diff.output and "instances: 3 → 5" in diff.output
    assert cluster.cca("apply", str(shop)).exit_code == 0

    text = shop.read_text()
    start = text.index("service payments/database {")
    end = text.index("\n}\n", start) + 3
    shop.write_text(text[:start] + text[end:])
    pruned = cluster.cca("apply", str(shop))
    assert pruned.exit_code == 0, pruned.output
    assert "service payments/database pruned" in pruned.output
    gone = cluster.cca("get", "services", "payments/database")
    assert gone.exit_code == 1 and "not found" in gone.output

    secret = cluster.cca("secret", "set", "payments/database.password", input="correct-horse-battery")
    assert secret.exit_code == 0, secret.output

    grants = shop.parent / "grants.cca"
    grants.write_text(GRANTS)
    assert cluster.cca("apply", str(grants)).exit_code == 0
    assert cluster.cca("user", "create", "alice", "--team", "storefront").exit_code == 0
    token = cluster.cca("user", "token", "alice").output.splitlines()[0]
    ca = str(cluster.home / "clusters" / "default" / "ca.crt")
    added = cluster.cca("context", "add", "alice", "--server", f"127.0.0.1:{cluster.port}", "--ca", ca,
                        "--token", token, "--no-use")
    assert added.exit_code == 0, added.output
    alice = {"CCA_CONTEXT": "alice"}
    _edit(shop, "shop/web:1.4", "shop/web:1.5")
    allowed = cluster.cca("apply", str(shop), env=alice)
    assert allowed.exit_code == 0, allowed.output
    assert "service frontend/web configured" in allowed.output
    _edit(shop, "shop/checkout:2.0", "shop/checkout:2.1")
    denied = cluster.cca("apply", str(shop), env=alice)
    assert denied.exit_code == 1
    assert "team-isolation" in denied.output and "payments/checkout" in denied.output
    assert "payments" in denied.output  # the offending value: resource.team=payments
    checkout = json.loads(cluster.cca("get", "services", "payments/checkout", "-o", "json").output)
    assert checkout[0]["value"]["image"].endswith("checkout:2.0")  # nothing written

    policy = shop.parent / "no-latest.lp"
    policy.write_text(NO_LATEST)
    assert cluster.cca("policy", "apply", str(policy)).exit_code == 0
    assert "no-latest" in cluster.cca("policy", "list").output
    _edit(shop, "shop/checkout:2.1", "shop/checkout:latest")
    rejected = cluster.cca("apply", str(shop))
    assert rejected.exit_code == 1
    assert "no-latest" in rejected.output and "uses the mutable tag latest" in rejected.output

    audit = cluster.cca("audit", "-n", "100", "-o", "json")
    records = json.loads(audit.output)
    assert any(r["verb"] == "Apply" and r["decision"] == "denied" and r["principal"] == "alice"
               for r in records)


def test_done_when_on_sqlite(cli_cluster, tmp_path):
    run_scenario(cli_cluster, tmp_path)
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
    assert raw and b"correct-horse-battery" not in raw


@pytest.mark.slow
def test_done_when_on_etcd(etcd_cli_cluster, tmp_path):
    run_scenario(etcd_cli_cluster, tmp_path)


NODES = """\
node n1 { zone a  label disk = ssd  capacity { cpu 8  memory 16Gi } }
node n2 { zone b  label disk = ssd  capacity { cpu 8  memory 16Gi } }
"""


def test_live_plan_and_explain(cli_cluster, tmp_path):
    """`diff --plan` places against the live state; `explain` says why, from the live snapshot."""
    (tmp_path / "nodes.cca").write_text(NODES)
    assert cli_cluster.cca("apply", str(tmp_path / "nodes.cca")).exit_code == 0
    (tmp_path / "web.cca").write_text(
        "service web {\n    image nginx:1.27\n    instances 2\n"
        "    resources { cpu 1  memory 1Gi }\n    placement { zone spread }\n}\n")
    planned = cli_cluster.cca("diff", str(tmp_path / "web.cca"), "--plan", "-o", "json")
    assert planned.exit_code == 0, planned.output
    placements = json.loads(planned.output)["plan"]["placements"]
    assert sorted(p["node"] for p in placements if p["service"] == "web") == ["n1", "n2"]
    text = cli_cluster.cca("diff", str(tmp_path / "web.cca"), "--plan")
    assert "+ service web" in text.output and "2 placed" in text.output
    missing = cli_cluster.cca("explain", "nothere")
    assert missing.exit_code == 1 and "nothere" in missing.output
