"""The policy workers' wire form: facts built with `wire=True` carry the same trees as encoding
their clingo symbols, trees decode back to the same symbols, and junk is refused, not crashed on."""

from __future__ import annotations

import pytest

from ccattler.engine.admission import probe
from ccattler.engine.admission.policy_wire import WireError, decode_symbol, encode_symbol
from ccattler.engine.admission.vocabulary import Facts


def test_wire_trees_are_the_symbols_encoded(monkeypatch):
    monkeypatch.setattr(probe, "Facts", lambda wanted=None: Facts(wanted, wire=True))
    facts = probe.sample_facts()
    signatures = list(facts.by_signature)
    trees = facts.select_trees(signatures)
    assert trees == [encode_symbol(s, {}) for s in facts.select(signatures)]
    assert [decode_symbol(t) for t in trees] == facts.select(signatures)


def test_facts_without_wire_have_no_trees():
    facts = Facts()
    facts.add("service", "shop/web")
    assert facts.select_trees([("service", 1)]) is None


@pytest.mark.parametrize("tree", [True, {"a": 1}, None, [], [1, []], ["f", "x"], ["f", [{}]], 1.5, 2**40,
                                  ["f", [2**31]]])
def test_junk_is_refused(tree):
    with pytest.raises(WireError):
        decode_symbol(tree)


def test_deep_nesting_is_refused():
    tree: list = ["f", []]
    for _ in range(5000):
        tree = ["f", [tree]]
    with pytest.raises(WireError):
        decode_symbol(tree)
