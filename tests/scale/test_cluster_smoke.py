"""Scale smoke test: 20 simulated nodes (agent host processes over mutual TLS to a real API server +
runner on SQLite) converge 300 instances, scale up by half, and, after one node is killed without a
clean shutdown, its instances run elsewhere. Correctness only; timings are printed, the benchmark
judges them (bench/cluster_bench.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "cluster_bench.py"


def _bench():
    spec = importlib.util.spec_from_file_location("cca_cluster_bench_smoke", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)
@pytest.mark.parametrize("agents", ["hollow", "threads"])
def test_twenty_nodes_converge_scale_up_and_survive_a_killed_node(capsys, agents):
    """With either host of simulated nodes: hollow ones on one event loop (the benchmark's default)
    and real `AgentLoop`s."""
    bench = _bench()
    args = bench.parser().parse_args(["--nodes", "20", "--instances", "300", "--ttl", "3", "--kill", "1",
                                      "--idle", "1", "--timeout", "45", "--agents", agents])
    figures = bench.one_run(args)  # raises TimeoutError naming the phase that did not converge
    with capsys.disabled():
        print("\n" + bench.report(figures, 1, args.ttl))
    assert figures["instances"] == 300
    assert figures["scale_up"]["instances"] > 300
    failure = figures["failure"]
    assert failure["killed_nodes"] == 1 and failure["affected"] > 0
    assert failure["detection"] <= 3 * args.ttl
    json.dumps(figures)  # what --json prints
