"""The issue's scenario through the language: compile real .cca sources, admit, commit, prune, diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from admission_builders import ADMIN, ALICE

from ccattler.dsl import DslError, Source
from ccattler.engine.admission import (
    Denied,
    Principal,
    apply_policy,
    apply_sources,
    delete_sources,
    diff_sources,
)

SHOP = Path(__file__).resolve().parents[3] / "examples" / "shop.cca"
GRANTS = Source("grants.cca", "grant developer to user alice\n", None)


def shop(text: str | None = None) -> Source:
    return Source("shop.cca", text if text is not None else SHOP.read_text(), SHOP.parent)


def edit(old: str, new: str, text: str | None = None) -> str:
    text = text if text is not None else SHOP.read_text()
    assert text.count(old) == 1, old
    return text.replace(old, new)


WEB_4 = ("    instances 3\n    expose 8080", "    instances 4\n    expose 8080")
CHECKOUT_6 = ("    instances 4\n    expose 443", "    instances 6\n    expose 443")


@pytest.fixture
def cluster(store):
    apply_sources(store, ADMIN, [shop()])
    apply_sources(store, ADMIN, [GRANTS])
    return store


def test_admin_applies_the_shop(store):
    result = apply_sources(store, ADMIN, [shop()])
    kinds = sorted({r.kind for r in result.added})
    assert kinds == ["connection", "gate", "network", "policy", "role", "secret", "service", "volume"]
    assert store.get("desired/service/payments/checkout").value["source"] == "shop.cca"


def test_storefront_developer_updates_web_but_not_checkout(cluster):
    result = apply_sources(cluster, ALICE, [shop(edit(*WEB_4))])
    assert [str(r) for r in result.changed] == ["service frontend/web"]
    assert cluster.get("desired/service/frontend/web").value["instances"] == 4

    before = cluster.revision()
    with pytest.raises(Denied) as info:
        apply_sources(cluster, ALICE, [shop(edit(*CHECKOUT_6, edit(*WEB_4)))])
    (denial,) = info.value.denials
    assert (denial.policy, denial.code) == ("team-isolation", "condition_false")
    assert denial.subject == "update service payments/checkout"
    assert "subject.team=storefront" in denial.value and "resource.team=(unset)" in denial.value
    assert "`when subject.team == resource.team` is false" in denial.message
    assert cluster.revision() == before
    assert cluster.get("desired/service/payments/checkout").value["instances"] == 4


def test_latest_tag_policy_rejects_with_its_message(cluster):
    apply_policy(cluster, ADMIN, "no-latest",
                 'deny(latest_tag, (S,)) :- image_tag(S, "latest").\n'
                 'message(latest_tag, "{0}: the latest tag is not allowed; pin a version").\n')
    with pytest.raises(Denied) as info:
        apply_sources(cluster, ADMIN, [shop(edit("shop/web:1.4", "shop/web:latest"))])
    assert str(info.value).endswith(
        "denied by no-latest [latest_tag]: frontend/web: the latest tag is not allowed; pin a version")


def test_removing_a_service_from_the_file_prunes_it(cluster):
    text = SHOP.read_text()
    start = text.index("service payments/database {")
    end = text.index("volume pgdata {")
    result = apply_sources(cluster, ADMIN, [shop(text[:start] + text[end:])])
    assert [str(r) for r in result.removed] == ["service payments/database"]
    assert cluster.get("desired/service/payments/database") is None
    assert cluster.get("desired/grant/" + _grant_hash(cluster)) is not None


def _grant_hash(store) -> str:
    facts, _ = store.range("desired/grant/")
    return facts[0].key.rsplit("/", 1)[1]


def test_diff_shows_adds_changes_and_removals(cluster):
    text = edit(*WEB_4) + "\nservice cache {\n    image redis:7\n}\n"
    text = text.replace("    deny frontend/web -> payments/database\n", "")
    diff = diff_sources(cluster, ADMIN, [shop(text)])
    assert [str(c.ref) for c in diff.added] == ["service cache"]
    assert [str(c.ref) for c in diff.changed] == ["service frontend/web"]
    assert diff.changed[0].fields == ("instances",)
    assert diff.changed[0].old["instances"] == 3 and diff.changed[0].new["instances"] == 4
    assert [c.old["action"] for c in diff.removed] == ["deny"]
    assert diff.removed[0].ref.kind == "network"
    assert not diff.denials
    assert cluster.get("desired/service/default/cache") is None


def test_diff_reports_what_admission_would_deny(cluster):
    diff = diff_sources(cluster, ALICE, [shop(edit(*CHECKOUT_6))])
    assert [d.policy for d in diff.denials] == ["team-isolation"]


def test_bad_source_passes_the_dsl_error_through_and_writes_nothing(cluster):
    before = cluster.revision()
    with pytest.raises(DslError) as info:
        apply_sources(cluster, ADMIN, [shop(edit("    instances 3\n", "    instnaces 3\n"))])
    assert "shop.cca:" in str(info.value)
    assert cluster.revision() == before


def test_delete_sources_removes_what_the_file_declares(cluster):
    result = delete_sources(cluster, ADMIN, [GRANTS])
    assert [r.kind for r in result.removed] == ["grant"]
    facts, _ = cluster.range("desired/")
    assert facts and not any(f.key.startswith("desired/grant/") for f in facts)


def test_diff_needs_read_access_to_what_it_shows(cluster):
    stranger = Principal("eve", "user")
    with pytest.raises(Denied) as info:
        diff_sources(cluster, stranger, [shop(edit(*WEB_4))])
    assert {(d.code, d.value) for d in info.value.denials} == {("no_role", "service.read")}


def test_one_file_applied_into_two_tenants_owns_each_copy_separately(store):
    web, worker = "service web {\n    image app:1.0\n}\n", "service worker {\n    image app:1.0\n}\n"
    app = Source("app.cca", web + worker, None)
    apply_sources(store, ADMIN, [app], tenant="alpha")
    apply_sources(store, ADMIN, [app], tenant="beta")
    assert store.get("desired/service/alpha/web").value["source"] == "app.cca@alpha"
    smaller = Source("app.cca", web, None)
    result = apply_sources(store, ADMIN, [smaller], tenant="beta")
    assert [str(r) for r in result.removed] == ["service beta/worker"]
    assert store.get("desired/service/alpha/worker") is not None
