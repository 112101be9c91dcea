"""Issue 12 class 3: every tenant has an instance quota — `limits.DEFAULT_TENANT_INSTANCES` unless
its `tenant` block declares one — so no apply can commit the cluster to unbounded work."""

from __future__ import annotations

import pytest
from admission_builders import ADMIN, service, tenant

from ccattler.dsl.limits import DEFAULT_TENANT_INSTANCES
from ccattler.engine.admission import Denied
from ccattler.engine.admission.operations import apply_compiled
from ccattler.engine.admission.vocabulary import effective_quota


def test_the_effective_quota_has_a_default_instance_limit():
    assert effective_quota(None) == {"instances": DEFAULT_TENANT_INSTANCES}
    assert effective_quota({"quota": {"cpu": 2000, "instances": None}}) == {
        "cpu": 2000, "instances": DEFAULT_TENANT_INSTANCES}
    assert effective_quota({"quota": {"instances": 3}}) == {"instances": 3}


@pytest.mark.parametrize("name", ["web", "payments/checkout"])
def test_a_tenant_without_a_quota_gets_the_default(store, name):
    half = DEFAULT_TENANT_INSTANCES // 2
    apply_compiled(store, ADMIN, dict([service(name, instances=half)]), {"a.cca"})
    other = name.rsplit("/", 1)[0] + "/other" if "/" in name else "other"
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([service(other, instances=half + 1)]), {"b.cca"})
    (denial,) = info.value.denials
    assert (denial.code, denial.value) == ("quota_exceeded",
                                           f"instances {2 * half + 1} > {DEFAULT_TENANT_INSTANCES}")


def test_a_declared_quota_replaces_the_default(store):
    apply_compiled(store, ADMIN, dict([tenant("big", instances=3 * DEFAULT_TENANT_INSTANCES)]), {"t.cca"})
    files = dict([service("big/a", instances=DEFAULT_TENANT_INSTANCES),
                  service("big/b", instances=DEFAULT_TENANT_INSTANCES)])
    assert apply_compiled(store, ADMIN, files, {"a.cca"}).added


def test_a_declared_lower_quota_is_enforced(store):
    apply_compiled(store, ADMIN, dict([tenant("small", instances=2)]), {"t.cca"})
    with pytest.raises(Denied):
        apply_compiled(store, ADMIN, dict([service("small/a", instances=3)]), {"a.cca"})
