"""The typed accessors of derived instance documents (engine/facts/derived_instance.py): the
document's own value when present, the one default when the field is absent, null or the document
itself is missing, and a default nobody can change by accident."""

from __future__ import annotations

import pytest

from ccattler.engine.facts import derived_instance
from ccattler.engine.facts.frozen import ReadOnlyDocument, freeze

# As the instance controller writes one (docs/facts.md).
STATEFUL = {"service": "shop/db", "name": "db-2", "ordinal": 2, "spec": "0123456789abcdef",
            "image": "registry.local:5000/shop/db:16", "resources": {"cpu": 500, "memory": 256 << 20}}
STATELESS = {**STATEFUL, "name": "web-7f3k2", "service": "shop/web", "ordinal": None}

SCALARS = ["service", "ordinal", "spec", "image"]


@pytest.mark.parametrize("field", [*SCALARS, "resources"])
def test_a_written_field_is_the_documents_own_value(field):
    doc = freeze(STATEFUL)
    assert getattr(derived_instance, field)(doc) is doc[field]


def test_typed_values():
    doc = freeze(STATEFUL)
    assert derived_instance.service(doc) == "shop/db"
    assert derived_instance.ordinal(doc) == 2 and type(derived_instance.ordinal(doc)) is int
    assert derived_instance.spec(doc) == "0123456789abcdef"
    assert derived_instance.image(doc) == "registry.local:5000/shop/db:16"
    assert derived_instance.resources(doc) == {"cpu": 500, "memory": 256 << 20}


def test_a_stateless_instance_has_no_ordinal():
    assert derived_instance.ordinal(STATELESS) is None
    assert derived_instance.ordinal({**STATELESS, "ordinal": 0}) == 0  # 0 is an ordinal, not "none"


@pytest.mark.parametrize("doc", [
    pytest.param({"service": "shop/web", "name": "web-7f3k2"}, id="absent"),
    pytest.param({f: None for f in [*SCALARS, "resources"]}, id="null"),
    pytest.param(None, id="no-document"),
    pytest.param({}, id="empty-document"),
])
def test_an_unwritten_field_has_its_one_default(doc):
    for field in ("ordinal", "spec", "image"):
        assert getattr(derived_instance, field)(doc) is None, field
    assert derived_instance.resources(doc) == {}
    assert not derived_instance.resources(doc)  # "no own request" stays a truth test: `or` falls back


def test_empty_resources_fall_back_like_absent_ones():
    assert derived_instance.resources({"resources": {}}) == {}
    service = {"cpu": 100}
    assert (derived_instance.resources({"resources": {}}) or service) is service


def test_the_shared_default_cannot_be_changed():
    default = derived_instance.resources(None)
    assert derived_instance.resources({}) is default  # one shared default, not a new dict per read
    with pytest.raises(ReadOnlyDocument):
        default["cpu"] = 1  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ReadOnlyDocument):
        default.update(memory=1)
    assert derived_instance.resources(None) == {}
    assert dict(default) == {} and type(dict(default)) is dict  # a copy is a plain dict to change


@pytest.mark.parametrize("doc", [None, {}, {"service": None}, {"name": "web-7f3k2"}])
def test_an_unknown_service_is_none(doc):
    assert derived_instance.service(doc) is None
