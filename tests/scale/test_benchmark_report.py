"""What `cca benchmark` prints beside issue 13's targets (bench/cluster_bench.py `report`), and that
the failover benchmark (bench/ha_bench.py) is reachable from it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from typer.testing import CliRunner

from ccattler.cli.main import app

BENCH = Path(__file__).parents[2] / "bench" / "cluster_bench.py"


def _bench():
    spec = importlib.util.spec_from_file_location("cca_cluster_bench_report", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _figures(runner_cpu: float, server_cpu: float, etcd: bool) -> dict:
    converge = {"total": 3.0, "p50": 1.0, "p99": 2.5, "apply_call": 0.3, "all_placed": 1.2,
                "server_cpu_s": 4.0, "agents_cpu_s": 5.0,
                "etcd_cpu_s": {"etcd1": 1.5, "etcd2": 0.5, "etcd3": 0.25} if etcd else {}}
    idle = {"writes_per_s": 5.0, "runner_cpu": runner_cpu, "server_cpu": server_cpu,
            "etcd_cpu": {"etcd1": 0.03, "etcd2": 0.01, "etcd3": 0.01} if etcd else {}}
    failure = {"killed_nodes": 1, "affected": 20, "detection": 9.0, "replacement": 0.5}
    return {"nodes": 50, "instances": 1000, "store": "etcd3" if etcd else "sqlite", "startup": 4.0,
            "converge": converge, "idle": idle, "failure": failure, "server_peak_rss": 200 << 20}


def _line(text: str, what: str) -> str:
    return next(line for line in text.splitlines() if what in line)


def test_idle_target_is_server_plus_runner_within_ten_percent_of_a_core():
    bench = _bench()
    # runner 6 % alone missed the old ≤ 5 % runner target; with the server 8 % it meets ≤ 10 %
    met = _line(bench.report(_figures(0.06, 0.02, etcd=False), 3, 10.0), "idle: server + runner CPU")
    assert "8.0 %" in met and "≤ 10 %" in met and met.rstrip().endswith("met")
    missed = _line(bench.report(_figures(0.04, 0.07, etcd=False), 3, 10.0), "idle: server + runner CPU")
    assert "11.0 %" in missed and missed.rstrip().endswith("MISSED")
    assert "≤ 5 %" not in bench.report(_figures(0.04, 0.07, etcd=False), 3, 10.0)


def test_node_loss_total_is_judged_against_ttl_plus_three_seconds():
    text = _bench().report(_figures(0.01, 0.01, etcd=False), 3, 10.0)
    line = _line(text, "kill → all running elsewhere")
    assert "9.50 s" in line and "≤ 13 s" in line and line.rstrip().endswith("met")


def test_each_etcd_members_cpu_is_printed_beside_the_figures_and_only_on_etcd():
    bench = _bench()
    text = bench.report(_figures(0.01, 0.01, etcd=True), 3, 10.0)
    assert "1.5/0.5/0.2 s" in _line(text, "each etcd member")
    assert "3.0/1.0/1.0 %" in _line(text, "idle: each etcd member")
    assert "etcd" not in bench.report(_figures(0.01, 0.01, etcd=False), 3, 10.0).replace("sqlite", "")


def test_the_median_of_runs_keeps_the_etcd_members_apart():
    bench = _bench()
    runs = [_figures(0.01, 0.01, etcd=True) for _ in range(3)]
    for n, run in enumerate(runs):
        run["converge"]["etcd_cpu_s"]["etcd1"] = float(n)
    assert bench._median_of(runs)["converge"]["etcd_cpu_s"] == {"etcd1": 1.0, "etcd2": 0.5, "etcd3": 0.25}


def test_failover_is_reachable_from_cca_benchmark():
    result = CliRunner().invoke(app, ["benchmark", "failover", "--help"])
    assert result.exit_code == 0
    assert "runner" in result.output and "server" in result.output
    bad = CliRunner().invoke(app, ["benchmark", "failover", "leader"])
    assert bad.exit_code == 2 and "invalid choice" in bad.output
