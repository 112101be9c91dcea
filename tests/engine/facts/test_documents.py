"""The typed accessors of the documents many parts read (engine/facts/service_doc.py,
observed_instance.py): the document's own value when present, the one default when the field is
absent, null or the document itself is missing, and a default nobody can change by accident."""

from __future__ import annotations

import pytest

from ccattler.engine.facts import observed_instance, service_doc
from ccattler.engine.facts.frozen import ReadOnlyDocument, freeze

HORIZONTAL = {"min": 2, "max": 9, "targets": [{"metric": "cpu", "value": 60, "percent": True}]}
SERVICE = {
    "kind": "service", "tenant": "shop", "name": "web", "resources": {"cpu": 500, "memory": 256 << 20},
    "scale": {"horizontal": HORIZONTAL, "vertical": None},
    "placement": {"zone": "a", "require": []}, "update": {"max_unavailable": 2},
    "disruption": {"min_available": 1, "max_unavailable": None}, "tags": {"team": "shop"},
    "env": {"LOG": "info"}, "config": {"env": {}, "files": []},
    "expose": [{"port": 80, "protocol": "tcp", "external": False}],
    "secrets": [{"name": "shop/key", "mount": "/run/secrets/key"}], "connections": ["shop/db"],
    "volumes": [{"name": "shop/data", "path": "/data"}],
    "probes": {"liveness": None, "startup": None, "readiness": None},
    "init": [{"exec": "migrate", "timeout": None, "retry": 0}],
}

MAPPINGS = ["resources", "scale", "placement", "update", "disruption", "tags", "env", "config", "probes"]
LISTS = ["expose", "secrets", "connections", "volumes", "init"]


@pytest.mark.parametrize("field", MAPPINGS + LISTS)
def test_a_declared_field_is_the_documents_own_value(field):
    doc = freeze(SERVICE)
    assert getattr(service_doc, field)(doc) is doc[field]


@pytest.mark.parametrize("doc", [
    pytest.param({"kind": "service", "name": "web"}, id="absent"),
    pytest.param({f: None for f in MAPPINGS + LISTS}, id="null"),
    pytest.param({f: {} for f in MAPPINGS} | {f: [] for f in LISTS}, id="empty"),
    pytest.param(None, id="no-document"),
    pytest.param({}, id="empty-document"),
])
def test_an_undeclared_field_has_its_one_default(doc):
    for field in MAPPINGS:
        assert getattr(service_doc, field)(doc) == {}, field
    for field in LISTS:
        assert list(getattr(service_doc, field)(doc)) == [], field
    assert service_doc.horizontal(doc) == {} and service_doc.vertical(doc) == {}
    assert not service_doc.horizontal(doc)  # "has no horizontal block" stays a truth test


def test_scale_parts():
    assert service_doc.horizontal(SERVICE) == HORIZONTAL
    assert service_doc.vertical(SERVICE) == {}  # null part
    assert service_doc.vertical({"scale": {"vertical": {"cpu": {"min": 1}}}}) == {"cpu": {"min": 1}}
    assert service_doc.horizontal({"scale": {"horizontal": None}}) == {}


def test_the_shared_defaults_cannot_be_changed():
    with pytest.raises(ReadOnlyDocument, match="'cpu'"):
        service_doc.resources(None)["cpu"] = 1  # type: ignore[index]
    with pytest.raises(ReadOnlyDocument):
        service_doc.expose({}).append({"port": 1})  # type: ignore[attr-defined]
    with pytest.raises(ReadOnlyDocument):
        observed_instance.usage(None)["cpu"] = 1  # type: ignore[index]
    assert service_doc.resources(None) == {} and observed_instance.usage(None) == {}


@pytest.mark.parametrize(("doc", "usage"), [
    pytest.param({"state": "running", "usage": {"cpu": 120, "memory": 5 << 20, "pids": 3}},
                 {"cpu": 120, "memory": 5 << 20, "pids": 3}, id="running"),
    pytest.param({"state": "pending", "usage": None}, {}, id="null-before-running"),
    pytest.param({"state": "failed"}, {}, id="absent"),
    pytest.param(None, {}, id="no-report-yet"),
])
def test_observed_usage(doc, usage):
    assert observed_instance.usage(doc) == usage


def test_observed_volumes():
    mounted = [{"name": "shop/data", "path": "/data", "size": None, "used": 4096, "enforced": True}]
    assert observed_instance.volumes({"volumes": mounted}) == mounted
    assert list(observed_instance.volumes({"volumes": None})) == [] == list(observed_instance.volumes(None))
