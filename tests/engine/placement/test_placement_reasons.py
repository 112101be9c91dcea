"""Reason codes in English: one formatter per code, Nomad-style grouping, unknown codes generic."""

import pytest

from ccattler.engine.placement.reasons import KNOWN_CODES, describe, render, summarize
from ccattler.engine.solve import Const, Reject


def reject(node, code, args):
    return Reject("default/web", node, Const(code), args)


@pytest.mark.parametrize(("code", "args", "text"), [
    pytest.param("missing_label", ("gpu", "true"), "missing label gpu=true", id="missing_label"),
    pytest.param("restricted", ("gpu",), "node restricted to gpu (service does not accept it)",
                 id="restricted"),
    pytest.param("wrong_zone", ("a", ""), "not in zone a (node zone: none)", id="wrong_zone"),
    pytest.param("wrong_architecture", ("arm64", "amd64"), "architecture is not arm64 (node: amd64)",
                 id="wrong_architecture"),
    pytest.param("node_not_ready", ("draining",), "node draining", id="node_not_ready"),
    pytest.param("insufficient_cpu", (1000, 500), "insufficient cpu (need 1000m, free 500m)", id="cpu"),
    pytest.param("insufficient_memory", (2048, 512), "insufficient memory (need 2Gi, free 512Mi)",
                 id="memory"),
    pytest.param("separate_from", ("default/db",), "has room, but runs db (separate)", id="separate_from"),
    pytest.param("colocate_with", ("shop/redis",), "has room, but does not run shop/redis (colocate)",
                 id="colocate_with"),
    pytest.param("prefers_label", ("disk", "ssd"), "has room, but the service prefers label disk=ssd",
                 id="prefers_label"),
])
def test_each_code_has_words(code, args, text):
    assert code in KNOWN_CODES
    assert describe(code, args) == text


def test_unknown_code_prints_generically():
    assert describe("operator_quota", ("team-a", 3)) == "operator_quota(team-a, 3)"
    assert describe("odd", ()) == "odd"


def test_grouping_counts_nodes_and_keeps_most_free_capacity():
    records = summarize([
        reject("n1", "missing_label", ("gpu", "true")),
        reject("n2", "missing_label", ("gpu", "true")),
        reject("n3", "missing_label", ("gpu", "true")),
        reject("n4", "insufficient_cpu", (1000, 500)),
        reject("n5", "insufficient_cpu", (1000, 200)),
    ])
    assert records == [
        {"code": "missing_label", "args": ["gpu", "true"], "nodes": 3},
        {"code": "insufficient_cpu", "args": [1000, 500], "nodes": 2},
    ]
    assert [render(r) for r in records] == [
        "3 nodes: missing label gpu=true",
        "2 nodes: insufficient cpu (need 1000m, most free 500m)",
    ]


def test_zone_mismatches_group_by_wanted_zone():
    records = summarize([
        reject("n1", "wrong_zone", ("a", "b")),
        reject("n2", "wrong_zone", ("a", "c")),
        reject("n3", "wrong_architecture", ("arm64", "amd64")),
    ])
    assert [render(r) for r in records] == [
        "2 nodes: not in zone a",
        "1 node: architecture is not arm64 (node: amd64)",
    ]
