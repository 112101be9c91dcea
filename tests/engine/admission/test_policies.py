"""Operator .lp policies: validation with file:line messages, denials worded by `message`, warnings,
mutation by `set_default`, and the policy API's own authorization."""

from __future__ import annotations

import pytest
from admission_builders import ADMIN, ALICE, grant, operator_policy, policy, role, seed, service

from ccattler.engine.admission import (
    Denied,
    NotFound,
    PolicyError,
    apply_policy,
    authorize,
    delete_policy,
    list_policies,
    probe,
)
from ccattler.engine.admission.operations import apply_compiled
from ccattler.engine.facts import InvalidKey

NO_LATEST = """
% Mutable tags make rollbacks lie.
deny(latest_tag, (S, T)) :- service(S), image_tag(S, T), T == "latest".
message(latest_tag, "service {0} uses the mutable tag {1}; pin a version").
"""


def test_policy_forbidding_latest_rejects_an_apply_with_its_message(store):
    apply_policy(store, ADMIN, "no-latest", NO_LATEST)
    before = store.revision()
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([service("web", image="nginx:latest")]), {"shop.cca"})
    (denial,) = info.value.denials
    assert (denial.policy, denial.code) == ("no-latest", "latest_tag")
    assert denial.value == "default/web, latest"
    assert denial.message == "service default/web uses the mutable tag latest; pin a version"
    assert "denied by no-latest [latest_tag]" in str(info.value)
    assert store.revision() == before


@pytest.mark.parametrize("image", ["nginx", "registry.local:5000/nginx"], ids=["bare", "registry-port"])
def test_no_tag_means_latest(store, image):
    seed(store, operator_policy("no-latest", NO_LATEST))
    with pytest.raises(Denied):
        apply_compiled(store, ADMIN, dict([service("web", image=image)]), {"shop.cca"})


def test_pinned_and_digest_images_pass(store):
    seed(store, operator_policy("no-latest", NO_LATEST))
    files = dict([service("web", image="nginx:1.27"), service("api", image="app@sha256:abc")])
    assert len(apply_compiled(store, ADMIN, files, {"shop.cca"}).added) == 2


def test_policies_judge_only_what_the_request_changes(store):
    seed(store, service("old", image="nginx:latest", source="legacy.cca"))
    seed(store, operator_policy("no-latest", NO_LATEST))
    assert apply_compiled(store, ADMIN, dict([service("web", image="nginx:1.27")]), {"shop.cca"}).added


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("deny(x, (S,)) :- service(S)\n", "p.lp:2:1: error: syntax error", id="syntax"),
        pytest.param("deny(x, (S,)) :- not service(S).\n", "p.lp:1:1-33: error: unsafe variables",
                     id="unsafe"),
        pytest.param("deny(x, (S,)) :- servce(S).\n", "p.lp:1:18: error: unknown predicate servce/1",
                     id="unknown-predicate"),
        pytest.param("deny(x, (S,)) :- service(S, 1).\n", "unknown predicate service/2", id="wrong-arity"),
    ],
)
def test_invalid_policy_is_rejected_with_its_location(store, text, expected):
    before = store.revision()
    with pytest.raises(PolicyError) as info:
        apply_policy(store, ADMIN, "p", text)
    assert expected.split(":")[0] in str(info.value)
    assert expected.rsplit(": ", 1)[-1] in str(info.value)
    assert str(info.value).startswith("policy p is not valid")
    assert store.revision() == before and list_policies(store) == []


@pytest.mark.parametrize("text", ['#include "/etc/passwd".\n', '#script (python)\nimport os\n#end.\n'])
def test_includes_and_scripts_are_refused(store, text):
    with pytest.raises(PolicyError, match=r"p.lp:1: error: #(include|script) is not allowed"):
        apply_policy(store, ADMIN, "p", text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("n(0).\nn(X + 1) :- n(X), service(_).\n", id="arithmetic"),
        pytest.param('n(0) :- image_tag(_, "rare").\nn(f(X)) :- m(X).\nm(X) :- n(X).\n', id="function-cycle"),
    ],
)
def test_recursion_through_new_terms_is_refused(store, text):
    with pytest.raises(PolicyError, match=r"loop.lp:\d+:1: error: n/1 is derived recursively from new terms"):
        apply_policy(store, ADMIN, "loop", text)
    assert list_policies(store) == []


def test_bounded_helpers_are_fine(store):
    text = "pair((S, N)) :- service_instances(S, N).\ndeny(big, P) :- pair(P), P = (_, N), N > 9.\n"
    apply_policy(store, ADMIN, "pairs", text)


def test_policy_that_never_finishes_grounding_is_refused(store, monkeypatch):
    monkeypatch.setattr(probe, "PROBE_SECONDS", 2.0)
    # No recursion for the static check to see, yet grounding explodes: the child's wall clock
    # (or its CPU/memory limit) ends it.
    text = "big(X, Y) :- service(_), X = 1..100000000, Y = 1..100000000.\n"
    with pytest.raises(PolicyError, match=r"did not finish in 2 s|the policy checker died"):
        apply_policy(store, ADMIN, "loop", text)
    assert list_policies(store) == []


def test_helper_predicates_derived_by_the_policy_are_fine(store):
    text = 'big(S) :- service_instances(S, N), N > 5.\ndeny(too_big, (S,)) :- big(S).\n'
    seed(store, operator_policy("size", text))
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([service("web", instances=6)]), {"shop.cca"})
    assert info.value.denials[0].message == "too_big (default/web)"


def test_warnings_do_not_block(store):
    text = ('warn(no_owner, (S,)) :- service(S), not resource_attr(S, "owner", _).\n'
            'message(no_owner, "{0} has no owner").\n')
    seed(store, operator_policy("owners", text))
    result = apply_compiled(store, ADMIN, dict([service("web")]), {"shop.cca"})
    warnings = [(w.policy, w.code, w.message) for w in result.warnings]
    assert warnings == [("owners", "no_owner", "default/web has no owner")]


def test_set_default_mutates_then_judges_the_result(store):
    seed(store, operator_policy("default-owner",
                                 'set_default(S, "owner", "platform") :- service(S).\n'
                                 'set_default(S, "tags.cost-center", "42") :- service(S).\n'))
    apply_compiled(store, ADMIN, dict([service("web"), service("api", owner="shop")]), {"shop.cca"})
    assert store.get("desired/service/default/web").value["owner"] == "platform"
    assert store.get("desired/service/default/web").value["tags"] == {"cost-center": "42"}
    assert store.get("desired/service/default/api").value["owner"] == "shop"
    again = apply_compiled(store, ADMIN, dict([service("web"), service("api", owner="shop")]), {"shop.cca"})
    assert not again.changed and len(again.unchanged) == 2


def test_mutation_result_is_judged_again(store):
    # The mutation gives every service team payments; team-isolation then judges that result.
    seed(store, role("dev", "service.create"), grant("dev", "user", "alice"),
         policy("iso", ["service.create"], [("subject.team", "==", "resource.team")]))
    seed(store, operator_policy("owner", 'set_default(S, "owner", "payments") :- service(S).\n'))
    with pytest.raises(Denied) as info:
        apply_compiled(store, ALICE, dict([service("web", tags={"team": "storefront"})]), {"shop.cca"})
    assert info.value.denials[0].policy == "iso"


def test_conflicting_and_unknown_mutations_deny(store):
    seed(store, operator_policy("a", 'set_default(S, "owner", "x") :- service(S).\n'))
    seed(store, operator_policy("b", 'set_default(S, "owner", "y") :- service(S).\n'
                                    'set_default(S, "image", "z") :- service(S).\n'))
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([service("web")]), {"shop.cca"})
    assert sorted(d.code for d in info.value.denials) == ["bad_mutation", "mutation_conflict"]


def test_operator_policies_also_judge_authorize(store):
    seed(store, role("ops", "service.exec"), grant("ops", "user", "alice"),
         service("payments/db", tags={"tier": "data"}), service("payments/api"))
    text = 'deny(exec_data, (N,)) :- request(exec, service, N), resource_attr(N, "tags.tier", "data").\n'
    seed(store, operator_policy("no-exec-data", text))
    assert authorize(store, ALICE, "service.exec", "payments/api").allowed
    decision = authorize(store, ALICE, "service.exec", "payments/db")
    assert not decision.allowed and decision.denials[0].policy == "no-exec-data"


def test_policy_api_is_authorized_and_listed(store):
    seed(store, role("pol", "policy.create"), grant("pol", "user", "alice"))
    apply_policy(store, ALICE, "no-latest", NO_LATEST)
    assert [p.name for p in list_policies(store)] == ["no-latest"]
    with pytest.raises(Denied) as info:
        apply_policy(store, ALICE, "no-latest", NO_LATEST + "% edited\n")
    assert info.value.denials[0].value == "policy.update"
    with pytest.raises(Denied):
        delete_policy(store, ALICE, "no-latest")
    delete_policy(store, ADMIN, "no-latest")
    assert list_policies(store) == []
    with pytest.raises(NotFound):
        delete_policy(store, ADMIN, "no-latest")


def test_policy_names_are_checked(store):
    with pytest.raises(InvalidKey):
        apply_policy(store, ADMIN, "../x", NO_LATEST)


def test_a_stored_policy_that_no_longer_parses_denies_and_says_so(store):
    seed(store, operator_policy("broken", "deny(x :- .\n"))
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([service("web")]), {"shop.cca"})
    (denial,) = info.value.denials
    assert (denial.policy, denial.code) == ("broken", "policy_error")
    assert "broken.lp:1:" in denial.message
