"""The shipped examples compile; the documents have the shapes docs/facts.md fixes."""

from pathlib import Path

from ccattler.dsl import compile_sources, load_sources

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_sim_cluster_compiles_nodes_and_services():
    facts = compile_sources(load_sources([EXAMPLES / "sim-cluster.cca"]))
    n4 = facts["desired/node/n4"]
    assert n4["zone"] == "b"
    assert n4["labels"] == {"gpu": "true"}
    assert n4["restrictions"] == ["gpu"]
    assert n4["capacity"] == {"cpu": 16000, "memory": 64 * 2**30}
    trainer = facts["desired/service/default/trainer"]
    assert trainer["placement"]["require"] == [{"key": "gpu", "value": "true"}]
    assert trainer["resources"] == {"cpu": 4000, "memory": 16 * 2**30}
    assert facts["desired/service/default/cache"]["placement"]["separate"] == ["default/web"]


def test_compile_is_deterministic():
    sources = load_sources([EXAMPLES])
    first = compile_sources(sources)
    assert list(first) == sorted(first)
    assert repr(first) == repr(compile_sources(load_sources([EXAMPLES])))


def test_compile_is_byte_identical_across_processes():
    """Same sources → the same bytes, whatever the interpreter's hash seed."""
    import os
    import subprocess
    import sys

    golden = Path(__file__).with_name("golden")
    script = (
        "import json, sys; from ccattler.dsl import compile_sources, load_sources;"
        "[sys.stdout.write(json.dumps(compile_sources(load_sources([p])), ensure_ascii=False))"
        " for p in sys.argv[1:]]"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", script, str(EXAMPLES), *map(str, golden.glob("*.cca"))],
                       check=True,
                       capture_output=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
