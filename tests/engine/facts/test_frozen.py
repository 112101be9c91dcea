"""Read-only documents (engine/facts/frozen.py): every mutator refuses naming what it touched, while
reading, comparing, encoding and copying behave as for plain JSON values."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from ccattler.engine.facts.frozen import FrozenDict, FrozenList, ReadOnlyDocument, freeze, thaw

DOC = {"name": "web", "resources": {"cpu": 100, "memory": 0}, "expose": [{"port": 80}], "tags": {}}


@pytest.mark.parametrize(("mutate", "named"), [
    pytest.param(lambda d: d.__setitem__("instances", 3), "'instances'", id="set"),
    pytest.param(lambda d: d["resources"].__setitem__("cpu", 1), "'cpu'", id="nested-set"),
    pytest.param(lambda d: d.__delitem__("tags"), "'tags'", id="delete"),
    pytest.param(lambda d: d.setdefault("env", {}), "'env'", id="setdefault"),
    pytest.param(lambda d: d.pop("name"), "'name'", id="pop"),
    pytest.param(lambda d: d.update(image="x"), "'image'", id="update"),
    pytest.param(lambda d: d.popitem(), "popitem", id="popitem"),
    pytest.param(lambda d: d.clear(), "clear", id="clear"),
    pytest.param(lambda d: d["tags"].__ior__({"a": "b"}), "|=", id="ior"),
    pytest.param(lambda d: d["expose"].append({"port": 81}), "append", id="append"),
    pytest.param(lambda d: d["expose"][0].__setitem__("port", 81), "'port'", id="list-item-set"),
    pytest.param(lambda d: d["expose"].__setitem__(0, {}), "0", id="list-set"),
    pytest.param(lambda d: d["expose"].extend([]), "extend", id="extend"),
    pytest.param(lambda d: d["expose"].__iadd__([]), "+=", id="iadd"),
    pytest.param(lambda d: d["expose"].sort(), "sorted()", id="sort"),
    pytest.param(lambda d: d["expose"].pop(), "pop", id="list-pop"),
])
def test_every_mutator_refuses_with_a_type_error_naming_the_key(mutate, named):
    doc = freeze(DOC)
    with pytest.raises(TypeError) as refused:
        mutate(doc)
    assert isinstance(refused.value, ReadOnlyDocument)
    assert named in str(refused.value) and "thaw()" in str(refused.value)
    assert doc == DOC  # nothing half-applied


def test_a_frozen_document_reads_compares_and_encodes_like_the_plain_one():
    doc = freeze(DOC)
    assert isinstance(doc, dict) and isinstance(doc["expose"], list)
    assert doc == DOC and doc["expose"] == [{"port": 80}]
    assert json.dumps(doc, sort_keys=True) == json.dumps(DOC, sort_keys=True)
    assert pickle.loads(pickle.dumps(doc)) == DOC
    assert freeze(doc) is doc  # already frozen: no copy
    assert freeze(3) == 3 and freeze(None) is None and freeze("x") == "x"


def test_copies_are_plain_and_thaw_is_deep():
    doc = freeze(DOC)
    for shallow in (dict(doc), doc.copy(), copy.copy(doc), doc | {"instances": 2}):
        assert type(shallow) is dict
        shallow["instances"] = 2
    assert type(dict(doc)["resources"]) is FrozenDict  # shallow: nested values stay frozen
    assert type(list(doc["expose"])) is list and type(doc["expose"] + []) is list
    for deep in (thaw(doc), copy.deepcopy(doc)):
        assert deep == DOC and type(deep) is dict and type(deep["expose"]) is list
        deep["resources"]["cpu"] = 1
        deep["expose"][0]["port"] = 81
    assert doc == DOC and type(doc["expose"]) is FrozenList
