"""Apply semantics: one atomic commit, pruning per file, nothing written on denial, quota, delete."""

from __future__ import annotations

import pytest
from admission_builders import ADMIN, ALICE, grant, role, seed, service, tenant

from ccattler.engine.admission import Conflict, Denied, NotFound, UnknownKind, delete_objects
from ccattler.engine.admission.operations import apply_compiled
from ccattler.engine.facts import InvalidKey


def test_first_apply_adds_everything_in_one_revision(store):
    files = dict([service("web"), service("api"), service("payments/checkout")])
    before = store.revision()
    result = apply_compiled(store, ADMIN, files, {"shop.cca"})
    assert result.revision == before + 1
    assert sorted(str(r) for r in result.added) == ["service api", "service payments/checkout", "service web"]
    facts, _ = store.range("desired/service/")
    assert {f.mod_revision for f in facts} == {result.revision}


def test_reapply_unchanged_writes_nothing(store):
    files = dict([service("web")])
    first = apply_compiled(store, ADMIN, files, {"shop.cca"})
    again = apply_compiled(store, ADMIN, files, {"shop.cca"})
    assert again.revision == first.revision == store.revision()
    assert [str(r) for r in again.unchanged] == ["service web"]
    assert not (again.added or again.changed or again.removed)


def test_reapply_prunes_what_the_file_no_longer_declares(store):
    apply_compiled(store, ADMIN, dict([service("web"), service("api")]), {"shop.cca"})
    result = apply_compiled(store, ADMIN, dict([service("web")]), {"shop.cca"})
    assert [str(r) for r in result.removed] == ["service api"]
    assert store.get("desired/service/default/api") is None


def test_prune_never_touches_other_files(store):
    apply_compiled(store, ADMIN, dict([service("web", source="a.cca")]), {"a.cca"})
    apply_compiled(store, ADMIN, dict([service("db", source="b.cca")]), {"b.cca"})
    result = apply_compiled(store, ADMIN, {}, {"a.cca"})
    assert [str(r) for r in result.removed] == ["service web"]
    assert store.get("desired/service/default/db") is not None


def test_moving_an_object_to_another_file_warns(store):
    apply_compiled(store, ADMIN, dict([service("web", source="a.cca")]), {"a.cca"})
    result = apply_compiled(store, ADMIN, dict([service("web", source="b.cca")]), {"b.cca"})
    assert [w.code for w in result.warnings] == ["owner_changed"]
    assert "a.cca" in result.warnings[0].message
    # a.cca no longer owns it: applying a.cca empty prunes nothing.
    assert not apply_compiled(store, ADMIN, {}, {"a.cca"}).removed


def test_denial_of_one_object_writes_nothing_at_all(store):
    seed(store, role("dev", "service.create"), grant("dev", "user", "alice"))
    before = store.revision()
    files = dict([service("web", source="x.cca"), role("sneaky", "cluster.admin", source="x.cca")])
    with pytest.raises(Denied) as info:
        apply_compiled(store, ALICE, files, {"x.cca"})
    reasons = {(d.code, d.value) for d in info.value.denials}
    assert reasons == {("no_role", "role.create"), ("escalation", "cluster.admin")}
    assert store.revision() == before
    assert store.get("desired/service/default/web") is None


def test_dry_run_judges_but_writes_nothing(store):
    result = apply_compiled(store, ADMIN, dict([service("web")]), {"shop.cca"}, dry_run=True)
    assert result.dry_run and [str(r) for r in result.added] == ["service web"]
    assert store.get("desired/service/default/web") is None


def test_quota_exceeded_is_denied_with_the_numbers(store):
    seed(store, tenant("payments", cpu=2000, instances=10))
    files = dict([service("payments/checkout", instances=6, cpu=500)])
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, files, {"shop.cca"})
    (denial,) = info.value.denials
    assert (denial.policy, denial.code, denial.value) == ("quota", "quota_exceeded", "cpu 3000m > 2000m")
    assert denial.subject == "tenant payments"
    assert store.get("desired/service/payments/checkout") is None


def test_quota_counts_the_whole_tenant_after_the_apply(store):
    seed(store, tenant("payments", instances=5), service("payments/db", instances=3, source="db.cca"))
    apply_compiled(store, ADMIN, dict([service("payments/checkout", instances=2)]), {"shop.cca"})
    with pytest.raises(Denied):
        apply_compiled(store, ADMIN, dict([service("payments/checkout", instances=3)]), {"shop.cca"})


def test_quota_counts_the_autoscaling_minimum(store):
    seed(store, tenant("t", instances=4))
    key, doc = service("t/a", instances=1)
    doc["scale"] = {"horizontal": {"min": 5, "max": 9}, "vertical": None}
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, {key: doc}, {"a.cca"})
    assert info.value.denials[0].value == "instances 5 > 4"


def test_memory_quota_in_mib(store):
    seed(store, tenant("t", memory=1024 * 2**20))
    ok = dict([service("t/a", instances=4, memory=256 * 2**20)])
    apply_compiled(store, ADMIN, ok, {"a.cca"})
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([service("t/a", instances=5, memory=256 * 2**20)]), {"a.cca"})
    assert info.value.denials[0].value == "memory 1280Mi > 1024Mi"


def test_quota_declared_in_the_same_apply_counts(store):
    files = dict([tenant("t", instances=1, source="a.cca"), service("t/a", instances=2, source="a.cca")])
    with pytest.raises(Denied):
        apply_compiled(store, ADMIN, files, {"a.cca"})


def test_delete_object(store):
    apply_compiled(store, ADMIN, dict([service("payments/checkout")]), {"shop.cca"})
    result = delete_objects(store, ADMIN, "services", "payments/checkout")
    assert [str(r) for r in result.removed] == ["service payments/checkout"]
    assert store.get("desired/service/payments/checkout") is None


def test_delete_needs_delete_capability(store):
    seed(store, service("web"), role("dev", "service.update"), grant("dev", "user", "alice"))
    with pytest.raises(Denied):
        delete_objects(store, ALICE, "service", "web")
    assert store.get("desired/service/default/web") is not None


@pytest.mark.parametrize(
    ("kind", "name", "error"),
    [
        pytest.param("service", "../x", InvalidKey, id="path-like-name"),
        pytest.param("service", "a/b/c", InvalidKey, id="two-slashes"),
        pytest.param("pod", "web", UnknownKind, id="unknown-kind"),
        pytest.param("lp", "p", UnknownKind, id="lp-through-policy-api-only"),
        pytest.param("service", "ghost", NotFound, id="missing"),
    ],
)
def test_delete_bad_input(store, kind, name, error):
    before = store.revision()
    with pytest.raises(error):
        delete_objects(store, ADMIN, kind, name)
    assert store.revision() == before


def test_unknown_kind_in_compiled_documents_is_refused(store):
    with pytest.raises(UnknownKind):
        apply_compiled(store, ADMIN, {"desired/pod/default/web": {"source": "x.cca"}}, {"x.cca"})


def test_conflicting_writer_is_retried_then_reported(store, monkeypatch):
    seed(store, role("viewer", "service.read"))
    real_txn = store.txn
    attempts = []

    def racing_txn(compares, puts, deletes, lease=None):
        # Someone edits a role admission read, between the read and the commit, every time.
        attempts.append(1)
        real_txn((), [role("viewer", "service.read", scopes=(f"t{len(attempts)}",))], ())
        return real_txn(compares, puts, deletes, lease)

    monkeypatch.setattr(store, "txn", racing_txn)
    with pytest.raises(Conflict):
        apply_compiled(store, ADMIN, dict([service("web")]), {"shop.cca"})
    assert len(attempts) == 3
    assert store.get("desired/service/default/web") is None


def test_a_grant_revoked_during_admission_is_seen_on_retry(store, monkeypatch):
    key, doc = grant("dev", "user", "alice")
    seed(store, role("dev", "service.create"), (key, doc))
    real_txn = store.txn
    revoked = []

    def revoking_txn(compares, puts, deletes, lease=None):
        if not revoked:  # the admin revokes the grant after admission read it, before the commit
            revoked.append(real_txn((), (), [key]))
        return real_txn(compares, puts, deletes, lease)

    monkeypatch.setattr(store, "txn", revoking_txn)
    with pytest.raises(Denied) as info:
        apply_compiled(store, ALICE, dict([service("web")]), {"shop.cca"})
    assert info.value.denials[0].code == "no_role"
    assert store.get("desired/service/default/web") is None


def _exposing(full: str, *exposes: tuple[int, str, bool], source: str = "shop.cca"):
    key, doc = service(full, source=source)
    doc["expose"] = [{"port": p, "protocol": proto, "external": ext} for p, proto, ext in exposes]
    return key, doc


def test_two_services_on_one_external_port_are_refused_naming_both(store):
    apply_compiled(store, ADMIN, dict([_exposing("shop/web", (443, "http", True))]), {"shop.cca"})
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([_exposing("blog/site", (8080, "tcp", False), (443, "tcp", True),
                                                     source="blog.cca")]), {"blog.cca"})
    (denial,) = info.value.denials
    assert (denial.policy, denial.code, denial.value) == ("network", "external_port_taken", "443/tcp")
    assert "blog/site" in denial.message and "shop/web" in denial.message, denial.message
    assert store.get("desired/service/blog/site") is None


def test_both_claimants_in_one_apply_are_each_refused(store):
    files = dict([_exposing("a/x", (9000, "tcp", True)), _exposing("b/y", (9000, "tcp", True))])
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, files, {"shop.cca"})
    assert sorted(d.subject for d in info.value.denials) == ["create service a/x", "create service b/y"]


def test_external_port_other_protocol_or_internal_or_own_reapply_passes(store):
    apply_compiled(store, ADMIN, dict([_exposing("shop/web", (443, "http", True))]), {"shop.cca"})
    apply_compiled(store, ADMIN, dict([_exposing("dns/resolver", (443, "udp", True)),
                                       _exposing("blog/site", (443, "tcp", False))]), {"other.cca"})
    # the owner changing its own service keeps its port
    apply_compiled(store, ADMIN, dict([_exposing("shop/web", (443, "tcp", True), (80, "http", True))]),
                   {"shop.cca"})
    assert store.get("desired/service/shop/web").value["expose"][1]["port"] == 80
