"""RBAC/ABAC decided by rules/admission.lp: roles, scopes, grants, groups and `when` policies."""

from __future__ import annotations

import pytest
from admission_builders import ADMIN, ALICE, grant, policy, role, seed, service

from ccattler.engine.admission import BadCapability, Denied, Principal, authorize
from ccattler.engine.admission.operations import apply_compiled


def shop_file(**services: dict) -> dict:
    """shop.cca as compiled: two services (keyword overrides per service), a role and a policy."""
    return dict([
        role("developer", "service.read", "service.update", source="shop.cca"),
        policy("team-isolation", ["service.update"], [("subject.team", "==", "resource.team")],
               source="shop.cca"),
        service("frontend/web", **{"tags": {"team": "storefront"}, **services.get("web", {})}),
        service("payments/checkout", **{"tags": {"team": "payments"}, **services.get("checkout", {})}),
    ])


@pytest.fixture
def shop(store):
    seed(store, *shop_file().items(), grant("developer", "user", "alice"))
    return store


def test_developer_updates_own_team_service(shop):
    result = apply_compiled(shop, ALICE, shop_file(web={"instances": 5}), {"shop.cca"})
    assert [str(r) for r in result.changed] == ["service frontend/web"]
    assert len(result.unchanged) == 3
    assert shop.get("desired/service/frontend/web").value["instances"] == 5


def test_team_isolation_denies_other_team_and_says_why(shop):
    key = "desired/service/payments/checkout"
    before = shop.revision()
    with pytest.raises(Denied) as info:
        apply_compiled(shop, ALICE, shop_file(web={"instances": 5}, checkout={"instances": 9}), {"shop.cca"})
    denial = info.value.denials[0]
    assert denial.policy == "team-isolation"
    assert denial.code == "condition_false"
    assert "resource.team=payments" in denial.value
    assert "subject.team=storefront" in denial.value
    assert "update service payments/checkout" in str(info.value)
    assert shop.revision() == before
    assert shop.get(key).value["instances"] == 1
    assert shop.get("desired/service/frontend/web").value["instances"] == 1


def test_rewriting_the_owner_does_not_move_a_service_into_your_team(shop):
    with pytest.raises(Denied) as info:
        apply_compiled(shop, ALICE, shop_file(checkout={"owner": "storefront"}), {"shop.cca"})
    assert {d.policy for d in info.value.denials} == {"team-isolation"}


def test_without_a_role_the_request_is_denied_by_rbac(shop):
    key, doc = service("frontend/new")
    with pytest.raises(Denied) as info:
        apply_compiled(shop, ALICE, {key: doc}, {"new.cca"})
    (denial,) = info.value.denials
    assert (denial.policy, denial.code, denial.value) == ("rbac", "no_role", "service.create")
    assert "in tenant frontend" in denial.message


def test_admin_may_do_anything(store):
    key, doc = service("payments/checkout")
    result = apply_compiled(store, ADMIN, dict([role("r", "service.read"), (key, doc)]), {"shop.cca"})
    assert len(result.added) == 2


def test_creating_roles_needs_role_create(shop):
    key, doc = role("superuser", "cluster.admin", source="mine.cca")
    with pytest.raises(Denied) as info:
        apply_compiled(shop, ALICE, {key: doc}, {"mine.cca"})
    assert info.value.denials[0].value == "role.create"


@pytest.mark.parametrize(
    ("capability", "resource", "allowed"),
    [
        pytest.param("service.read", "payments/checkout", True, id="read-any-tenant"),
        pytest.param("service.update", "frontend/web", True, id="update-own-team"),
        pytest.param("service.update", "payments/checkout", False, id="update-other-team"),
        pytest.param("workload.update", "frontend/web", True, id="workload-alias"),
        pytest.param("service.exec", "frontend/web", False, id="exec-not-granted"),
        pytest.param("secret.read", "frontend/db", False, id="secret-not-granted"),
        pytest.param("audit.read", None, False, id="audit"),
    ],
)
def test_authorize(shop, capability, resource, allowed):
    assert authorize(shop, ALICE, capability, resource).allowed is allowed


def test_scoped_role_applies_in_its_tenants_only(store):
    seed(store, role("ops", "service.exec", scopes=("payments",)), grant("ops", "group", "oncall"),
         service("payments/checkout"), service("frontend/web"))
    bob = Principal("bob", "user", groups=("oncall",))
    assert authorize(store, bob, "service.exec", "payments/checkout").allowed
    assert not authorize(store, bob, "service.exec", "frontend/web").allowed
    assert authorize(store, bob, "service.exec", "payments/*").allowed
    assert not authorize(store, bob, "node.read", "n1").allowed


def test_a_scope_is_a_path_matched_by_prefix(store):
    """`scope team/payments`: the object team/payments (and, were names paths, what lies under
    it); not the rest of tenant team, not a tenant-wide request on team."""
    seed(store, role("developer", "service.read", scopes=("team/payments",)),
         grant("developer", "user", "bob"), service("team/payments"), service("team/search"))
    bob = Principal("bob", "user")
    assert authorize(store, bob, "service.read", "team/payments").allowed
    assert not authorize(store, bob, "service.read", "team/search").allowed
    assert not authorize(store, bob, "service.read", "team/*").allowed
    assert not authorize(store, bob, "service.read", "payments/payments").allowed


def test_auth_group_membership_grants_roles(store):
    seed(store, role("viewer", "service.read"), grant("viewer", "group", "readers"),
         ("desired/group/default/readers", {"kind": "group", "tenant": "default", "name": "readers",
                                            "source": "auth.cca", "type": "auth", "members": ["carol"]}))
    assert authorize(store, Principal("carol", "user"), "service.read", "web").allowed
    assert not authorize(store, Principal("dave", "user"), "service.read", "web").allowed


@pytest.mark.parametrize(
    ("when", "allowed"),
    [
        pytest.param(("subject.groups", "in", ["sre", "oncall"]), True, id="in-list"),
        pytest.param(("subject.groups", "not_in", ["sre"]), True, id="not-in-list"),
        pytest.param(("resource.tenant", "!=", "payments"), False, id="neq-literal"),
        pytest.param(("resource.tags.tier", "==", "backend"), True, id="tag"),
        pytest.param(("resource.owner", "==", "payments"), False, id="missing-attribute-is-false"),
    ],
)
def test_policy_operators(store, when, allowed):
    seed(store, role("ops", "service.exec"), grant("ops", "user", "bob"),
         policy("p", ["service.exec"], [when]),
         service("payments/checkout", tags={"tier": "backend"}))
    bob = Principal("bob", "user", groups=("oncall",))
    decision = authorize(store, bob, "service.exec", "payments/checkout")
    assert decision.allowed is allowed
    if not allowed:
        assert decision.denials[0].policy == "p"


def test_cluster_admin_route_is_not_bound_by_policies_on_other_capabilities(shop):
    assert apply_compiled(shop, ADMIN, shop_file(checkout={"instances": 2}), {"shop.cca"}).changed


def test_mounting_a_secret_needs_secret_use(shop):
    with pytest.raises(Denied) as info:
        apply_compiled(shop, ALICE, shop_file(web={"secrets": ("frontend/api.key",)}), {"shop.cca"})
    (denial,) = info.value.denials
    assert (denial.code, denial.value) == ("no_role", "secret.use")
    assert denial.subject == "use secret frontend/api.key"


@pytest.fixture
def role_admin(store):
    """carol may manage roles and grants, and update services in payments only."""
    seed(store, role("role-admin", "role.create", "role.update", "role.read"),
         role("pay-dev", "service.update", scopes=("payments",)),
         grant("role-admin", "user", "carol"), grant("pay-dev", "user", "carol"),
         role("root", "cluster.admin", source="admin.cca"))
    return store


CAROL = Principal("carol", "user")


@pytest.mark.parametrize(
    ("writes", "escalates"),
    [
        pytest.param([role("r", "service.delete", source="c.cca")], "service.delete", id="new-capability"),
        pytest.param([role("r", "role.create", source="c.cca")], None, id="held-capability"),
        pytest.param([role("r", "service.update", scopes=("payments",), source="c.cca")], None,
                     id="held-in-scope"),
        pytest.param([role("r", "service.update", scopes=("payments/checkout",), source="c.cca")], None,
                     id="held-in-path-under-scope"),
        pytest.param([role("r", "service.update", scopes=("pay",), source="c.cca")], "service.update",
                     id="prefix-is-by-segment"),
        pytest.param([role("r", "service.update", source="c.cca")], "service.update", id="wider-scope"),
        pytest.param([grant("root", "user", "carol", source="c.cca")], "cluster.admin", id="grant-admin"),
        pytest.param([role("role-admin", "role.create", "cluster.admin", source="c.cca")], "cluster.admin",
                     id="edit-own-role"),
    ],
)
def test_roles_and_grants_confer_only_what_the_subject_holds(role_admin, writes, escalates):
    if escalates is None:
        assert apply_compiled(role_admin, CAROL, dict(writes), {"c.cca"}).added
        return
    before = role_admin.revision()
    with pytest.raises(Denied) as info:
        apply_compiled(role_admin, CAROL, dict(writes), {"c.cca"})
    assert {(d.code, d.value) for d in info.value.denials} == {("escalation", escalates)}
    assert role_admin.revision() == before


def test_joining_a_group_that_holds_admin_is_escalation(role_admin):
    seed(role_admin, grant("root", "group", "admins", source="admin.cca"))
    group = ("desired/group/default/admins", {"kind": "group", "tenant": "default", "name": "admins",
                                              "source": "c.cca", "type": "auth", "members": ["carol"]})
    with pytest.raises(Denied) as info:
        apply_compiled(role_admin, CAROL, dict([group]), {"c.cca"})
    assert info.value.denials[0].code == "escalation"
    assert "would confer cluster.admin in every tenant" in info.value.denials[0].message


@pytest.mark.parametrize("capability", ["service", "service.fly", "pods.read", "cluster.read"])
def test_unknown_capabilities_are_refused(store, capability):
    with pytest.raises(BadCapability):
        authorize(store, ALICE, capability, "web")


def test_scoped_cluster_admin_is_a_tenant_admin(store):
    seed(store, role("pay-admin", "cluster.admin", scopes=("payments",)), grant("pay-admin", "user", "pat"))
    pat = Principal("pat", "user")
    assert apply_compiled(store, pat, dict([service("payments/api", source="p.cca")]), {"p.cca"}).added
    for writes in ([service("frontend/web", source="p.cca")], [role("r", "service.read", source="p.cca")]):
        with pytest.raises(Denied) as info:
            apply_compiled(store, pat, dict(writes), {"p.cca"})
        assert info.value.denials[0].code == "no_role"


def test_same_request_same_verdict(shop):
    messages = set()
    files = shop_file(checkout={"instances": 9}, web={"owner": "x"})
    for _ in range(3):
        with pytest.raises(Denied) as info:
            apply_compiled(shop, ALICE, files, {"shop.cca"})
        messages.add(str(info.value))
    assert len(messages) == 1
