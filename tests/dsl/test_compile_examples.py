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
