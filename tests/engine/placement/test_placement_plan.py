"""`cca plan` and `--explain` end to end: .cca files → compiled facts → settled store → output."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ccattler.cli.main import app
from ccattler.dsl import compile_sources, load_sources
from ccattler.engine.placement.explain import explain
from ccattler.engine.placement.offline import PlanReport, simulate

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

UNPLACEABLE = """
node a1 { zone a  capacity { cpu 4  memory 8Gi }  label disk = ssd }
node a2 { zone a  capacity { cpu 4  memory 8Gi }  restrict dedicated }
node b1 { zone b  capacity { cpu 2  memory 4Gi }  label gpu = true }

service ml {
    image busybox
    instances 2
    resources { cpu 1  memory 1Gi }
    placement { require gpu = true  zone a }
}

service big {
    image busybox
    instances 3
    resources { cpu 3  memory 2Gi }
}

service payments/checkout {
    image busybox
    instances 2
    resources { cpu 500m  memory 256Mi }
}
"""


def plan_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["plan", *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_sim_cluster_json_contract():
    out = plan_json(str(EXAMPLES / "sim-cluster.cca"))
    assert set(out) == {"placements", "unplaced"}
    assert out["unplaced"] == []
    by_service: dict[str, list[str]] = {}
    for p in out["placements"]:
        assert set(p) == {"instance", "service", "node"}
        by_service.setdefault(p["service"], []).append(p["node"])
    assert len(by_service["web"]) == 6 and by_service["trainer"] == ["n4"]
    zone = {"n1": "a", "n2": "a", "n3": "b", "n4": "b", "n5": "c", "n6": "c"}
    assert sorted(zone[n] for n in by_service["web"]) == ["a", "a", "b", "b", "c", "c"]
    assert not set(by_service["cache"]) & set(by_service["web"])


def test_unplaced_instances_carry_reasons(tmp_path):
    path = tmp_path / "cluster.cca"
    path.write_text(UNPLACEABLE)
    out = plan_json(str(path))
    unplaced = {u["instance"]: u for u in out["unplaced"]}
    ml = [u for u in unplaced.values() if u["service"] == "ml"]
    assert len(ml) == 2
    assert "2 nodes: missing label gpu=true" in ml[0]["reasons"]
    assert "1 node: not in zone a (node zone: b)" in ml[0]["reasons"]
    big = [u for u in unplaced.values() if u["service"] == "big"]
    assert len(big) == 2 and any("insufficient cpu (need 3000m" in r for r in big[0]["reasons"])
    checkout = [p for p in out["placements"] if p["service"] == "payments/checkout"]
    assert len(checkout) == 2 and all(p["instance"].startswith("payments/checkout-") for p in checkout)


def test_table_output_is_readable(tmp_path):
    path = tmp_path / "cluster.cca"
    path.write_text(UNPLACEABLE)
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 0
    assert "SERVICE" in result.output and "WHY NOT PLACED" in result.output
    assert "placed" in result.output and "unplaced on 3 nodes" in result.output


@pytest.mark.parametrize(("text", "fragment"), [
    pytest.param("service web {\n  image busybox\n  instances x\n}\n", "bad.cca:3", id="syntax"),
    pytest.param("service web {\n  instances 2\n}\n", "bad.cca", id="missing-image"),
])
def test_invalid_input_exits_1_with_position(tmp_path, text, fragment):
    path = tmp_path / "bad.cca"
    path.write_text(text)
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 1
    assert fragment in result.output and "Traceback" not in result.output


def test_bad_output_format_is_usage_error():
    result = CliRunner().invoke(app, ["plan", str(EXAMPLES / "sim-cluster.cca"), "-o", "yaml"])
    assert result.exit_code == 2


def snapshot_of(text: str, tmp_path: Path):
    path = tmp_path / "c.cca"
    path.write_text(text)
    return simulate(compile_sources(load_sources([path])))


def test_explain_chosen_nodes_and_filtered_reasons():
    snapshot = simulate(compile_sources(load_sources([EXAMPLES / "sim-cluster.cca"])))
    web = explain(snapshot, "web")
    assert sum(c.replicas for c in web.chosen) == 6
    assert sum(r["nodes"] for r in web.filtered if r["code"] == "restricted") == 2
    cache = explain(snapshot, "cache")
    assert {r["code"]: r["nodes"] for r in cache.filtered}["separate_from"] == 3
    assert any(t[0] == "node_spread" for c in cache.chosen for t in c.terms) or cache.chosen


def test_explain_placed_replicas_says_when_and_where_now():
    """Placed replicas do not move: explain gives the revision and score they were placed with,
    where they would go now, and no longer says the other nodes "scored better"."""
    snapshot = simulate(compile_sources(load_sources([EXAMPLES / "sim-cluster.cca"])))
    web = explain(snapshot, "web")
    assert {n for n, _, _ in web.placed_at} == {c.node for c in web.chosen}
    assert all(rev == snapshot.revision or isinstance(rev, int) for _, rev, _ in web.placed_at)
    assert sum(c.replicas for c in web.now) == 6
    lines = "\n".join(web.lines())
    assert "placed at revision" in lines and "if re-placed now:" in lines
    assert "scored better" not in lines
    assert web.to_json()["now"] and web.to_json()["placed_at"]


def test_explain_unplaced_gives_minimal_blockers(tmp_path):
    snapshot = snapshot_of(UNPLACEABLE, tmp_path)
    ml = explain(snapshot, "ml")
    assert ml.unplaced == 2 and ml.chosen == ()
    # Two minimal sets exist; deletion finds one of them (each member needed, none extra).
    assert sorted(ml.blockers) in (
        ["ml is pinned to zone a", "ml requires label gpu=true"],
        ["ml is pinned to zone a", "node a1 is full with the requests already placed there",
         "node a2 restricts dedicated"],
    )
    big = explain(snapshot, "big")
    assert big.unplaced == 2
    assert "node a1 is full with the requests already placed there" in big.blockers
    assert "node a2 restricts dedicated" in big.blockers


def test_explain_by_instance_and_unknown_name(tmp_path):
    snapshot = snapshot_of(UNPLACEABLE, tmp_path)
    report = PlanReport.from_snapshot(snapshot)
    instance = next(p.instance for p in report.placements if p.service == "payments/checkout")
    assert explain(snapshot, instance).service == "payments/checkout"
    result = CliRunner().invoke(app, ["plan", "--explain", "nope", str(EXAMPLES / "sim-cluster.cca")])
    assert result.exit_code == 1 and "no service or instance 'nope'" in result.output


def test_explain_json(tmp_path):
    shutil.copy(EXAMPLES / "sim-cluster.cca", tmp_path / "sim.cca")
    args = ["plan", str(tmp_path / "sim.cca"), "--explain", "trainer", "-o", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["chosen"][0]["node"] == "n4"
    assert {"reason": "missing label gpu=true", "code": "missing_label", "args": ["gpu", "true"],
            "nodes": 5} in out["filtered"]


def test_operator_extension_directory_adds_a_preference(tmp_path):
    rules = tmp_path / "rules.d"
    rules.mkdir()
    (rules / "avoid-n1.lp").write_text(
        "% operators keep n1 for batch work (above the soft terms, below placing at all; zone\n"
        "% spread is decided before the solve and stays exact: zone a still has n2)\n"
        "#program place.\n"
        'cost(U, N, operator_avoid, 600, K) :- new(U, N, K), N = "n1".\n'
    )
    out = plan_json(str(EXAMPLES / "sim-cluster.cca"), "--rules", str(rules))
    assert out["unplaced"] == []
    assert "n1" not in {p["node"] for p in out["placements"]}


def test_operator_extension_with_error_names_file_and_line(tmp_path):
    rules = tmp_path / "rules.d"
    rules.mkdir()
    (rules / "broken.lp").write_text("% ok\nbad(X) :- not good(X).\n")
    result = CliRunner().invoke(app, ["plan", str(EXAMPLES / "sim-cluster.cca"), "--rules", str(rules)])
    assert result.exit_code == 1
    assert f"{rules / 'broken.lp'}:2:1" in result.output and "unsafe" in result.output


def test_settled_store_is_a_fixed_point():
    from ccattler.engine.controllers.instance import InstanceController
    from ccattler.engine.placement.controller import PlacementController
    from ccattler.engine.placement.offline import simulated_nodes
    from ccattler.engine.runner import settle
    from ccattler.engine.store.url import open_store

    facts = compile_sources(load_sources([EXAMPLES / "sim-cluster.cca"]))
    with open_store("sqlite://:memory:") as store:
        store.txn((), sorted({**facts, **simulated_nodes(facts)}.items()), ())
        controllers = [InstanceController(), PlacementController()]
        first = settle(store, controllers, now=0.0)
        assert first.rounds >= 2
        again = settle(store, controllers, now=0.0)
        assert again.rounds == 1 and again.revision == first.revision


NEW_USER = """# a small cluster, a web tier with a sidecar group, a db pinned to a zone
node node-a { zone eu-1a  capacity { cpu 4  memory 16Gi }  label disk = ssd }
node node-b { zone eu-1b  capacity { cpu 4  memory 16Gi } }
node node-c { zone eu-1c  capacity { cpu 2  memory 8Gi }  architecture arm64 }

service shop/web {
    image nginx:1.25
    instances 3
    resources { cpu 500m  memory 512Mi }
    placement { zone spread  separate "shop/db" }
}

service shop/proxy {
    image envoy:1.30
    instances 3
    resources { cpu 100m  memory 64Mi }
}

group shop/frontend {
    service shop/web
    service shop/proxy
}

service shop/db {
    image postgres:16
    instances 1
    resources { cpu 2  memory 4Gi }
    placement { zone eu-1a  require disk = ssd }
}

service shop/arm-only {
    image busybox
    instances 1
    resources { cpu 1  memory 1Gi }
    placement { architecture arm64 }
}
"""


def test_file_as_a_new_user_writes_it(tmp_path):
    path = tmp_path / "shop.cca"
    path.write_text(NEW_USER)
    out = plan_json(str(path))
    assert out["unplaced"] == []
    nodes = {}
    for p in out["placements"]:
        nodes.setdefault(p["service"], []).append(p["node"])
    assert sorted(nodes["shop/web"]) == ["node-a", "node-b", "node-c"]  # zone spread
    assert sorted(nodes["shop/proxy"]) == sorted(nodes["shop/web"])  # the group: replica i together
    assert nodes["shop/db"] == ["node-a"] and nodes["shop/arm-only"] == ["node-c"]


def test_explain_service_too_big_for_any_node(tmp_path):
    snapshot = snapshot_of(UNPLACEABLE.replace("cpu 3  memory 2Gi", "cpu 8  memory 2Gi"), tmp_path)
    big = explain(snapshot, "big")
    assert big.unplaced == 3
    assert big.blockers == ("no node is big enough for one replica: it needs 8000m cpu and 2048Mi memory; "
                            "the largest node has 4000m cpu, the most memory is 8192Mi",)



@pytest.mark.slow
def test_plan_is_identical_across_processes_and_hash_seeds():
    import os
    import subprocess
    import sys

    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-m", "ccattler.cli.main", "plan", str(EXAMPLES / "shop.cca"),
             str(EXAMPLES / "sim-cluster.cca"), "-o", "json"],
            capture_output=True, text=True, env=env, check=True, timeout=120,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
