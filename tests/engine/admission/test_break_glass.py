"""The break-glass rule: a deny-all operator policy never locks the cluster admin out of removing or
replacing policies, or of reading cluster and node status; it still binds everything else."""

from __future__ import annotations

import pytest
from admission_builders import ADMIN, ALICE, grant, operator_policy, role, seed, service

from ccattler.engine.admission import Denied, apply_policy, authorize, delete_policy, list_policies
from ccattler.engine.admission.operations import apply_compiled

DENY_ALL = "deny(all_denied, ()).\n"


@pytest.fixture
def bricked(store):
    seed(store, operator_policy("brick", DENY_ALL))
    return store


def test_admin_deletes_a_deny_all_policy(bricked):
    delete_policy(bricked, ADMIN, "brick")
    assert list_policies(bricked) == []
    apply_compiled(bricked, ADMIN, dict([service("web")]), {"shop.cca"})  # unbricked


def test_admin_replaces_a_deny_all_policy(bricked):
    apply_policy(bricked, ADMIN, "brick", "warn(w, ()) :- service(_).\n")
    assert [p.text for p in list_policies(bricked)] == ["warn(w, ()) :- service(_).\n"]


@pytest.mark.parametrize("capability", ["node.read", "audit.read", "policy.read", "policy.delete"])
def test_admin_reads_status_despite_a_deny_all_policy(bricked, capability):
    assert authorize(bricked, ADMIN, capability).allowed


def test_deny_all_still_binds_the_admin_elsewhere(bricked):
    with pytest.raises(Denied):
        apply_compiled(bricked, ADMIN, dict([service("web")]), {"shop.cca"})
    assert not authorize(bricked, ADMIN, "service.read", "default/web").allowed


def test_break_glass_is_only_for_the_admin(bricked):
    seed(bricked, role("pol", "policy.delete", "policy.read"), grant("pol", "user", "alice"))
    with pytest.raises(Denied):
        delete_policy(bricked, ALICE, "brick")
    assert not authorize(bricked, ALICE, "policy.read").allowed
    assert [p.name for p in list_policies(bricked)] == ["brick"]
