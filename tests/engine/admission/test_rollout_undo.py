"""`cca rollout undo`: the previous spec's fields from the rollout document go back into the service
document through admission (authorized like any change), and without a previous spec it refuses."""

from __future__ import annotations

import pytest
from admission_builders import ADMIN, ALICE, seed, service

from ccattler.engine.admission.model import Denied
from ccattler.engine.admission.rollout_undo import UndoRefused, undo_rollout
from ccattler.engine.controllers.instance import SPEC_FIELDS, spec_hash


def test_undo_writes_the_previous_spec_back_and_needs_authorization(store):
    old_key, old = service("shop/web", image="registry.local:5000/app:1.0")
    _, new = service("shop/web", image="registry.local:5000/app:2.0")
    seed(store, (old_key, new), ("derived/rollout/shop/web", {
        "spec": spec_hash(new), "previous": spec_hash(old),
        "fields": {spec_hash(old): {f: old.get(f) for f in SPEC_FIELDS}}}))
    with pytest.raises(Denied):
        undo_rollout(store, ALICE, "web", tenant="shop")
    assert store.get(old_key).value["image"].endswith("app:2.0")
    result = undo_rollout(store, ADMIN, "web", tenant="shop")
    assert result.changed
    doc = store.get(old_key).value
    assert doc["image"].endswith("app:1.0") and spec_hash(doc) == spec_hash(old)
    assert doc["undone"] == {"spec": spec_hash(old), "by": "admin"}


def test_undo_without_a_previous_spec_says_so(store):
    key, doc = service("shop/web")
    seed(store, (key, doc), ("derived/rollout/shop/web", {"spec": spec_hash(doc), "previous": None}))
    with pytest.raises(UndoRefused, match="no previous spec"):
        undo_rollout(store, ADMIN, "web", tenant="shop")
