"""Conformance: leases — expiry deletes keys with events, keepalive, revoke, unknown leases."""

from __future__ import annotations

import time

import pytest

from ccattler.engine.store import LeaseNotFound, StoreError

pytestmark = pytest.mark.store

# etcd rounds TTLs up to whole seconds and checks expiry every 500 ms; allow for both.
EXPIRY_WAIT = 6.0


def test_lease_expiry_deletes_its_keys_and_emits_delete_events(store):
    lease = store.lease_grant(1)
    store.txn(puts={"node/a": "up", "node/b": "up"}, lease=lease)
    store.put("node/keep", "forever")
    assert store.get("node/a").lease == lease
    with store.watch("node/") as watch:
        events = [watch.get(timeout=EXPIRY_WAIT), watch.get(timeout=EXPIRY_WAIT)]
    assert sorted((event.kind, event.key, event.prev_value) for event in events) == [
        ("delete", "node/a", "up"),
        ("delete", "node/b", "up"),
    ]
    assert events[0].revision == events[1].revision  # one expiry, one revision
    assert [fact.key for fact in store.range("node/")[0]] == ["node/keep"]
    with pytest.raises(LeaseNotFound):
        store.lease_keepalive(lease)


def test_keepalive_keeps_keys_past_their_ttl(store):
    lease = store.lease_grant(2)
    store.put("hb/n1", 1, lease=lease)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        store.lease_keepalive(lease)
        time.sleep(0.25)
    assert store.get("hb/n1").value == 1
    store.lease_revoke(lease)


def test_keepalive_returns_the_stores_revision(store):
    lease = store.lease_grant(5)
    _, revision = store.txn(puts={"hb/n2": 1}, lease=lease)
    assert store.lease_keepalive(lease) == revision == store.revision()
    store.put("other/k", 2)
    assert store.lease_keepalive(lease) == store.revision() == revision + 1
    store.lease_revoke(lease)


def test_revoke_deletes_the_keys_at_once(store):
    lease = store.lease_grant(30)
    store.put("leader/runner", "me", lease=lease)
    with store.watch("leader/") as watch:
        store.lease_revoke(lease)
        event = watch.get(timeout=2.0)
    assert (event.kind, event.key, event.prev_value) == ("delete", "leader/runner", "me")
    assert store.get("leader/runner") is None


def test_keepalive_of_a_revoked_lease_raises_lease_not_found(store):
    lease = store.lease_grant(30)
    store.lease_revoke(lease)
    with pytest.raises(LeaseNotFound):
        store.lease_keepalive(lease)


def test_revoking_an_unknown_lease_raises_lease_not_found(store):
    with pytest.raises(LeaseNotFound):
        store.lease_revoke(987654321)


def test_put_with_an_unknown_lease_is_refused_and_writes_nothing(store):
    with pytest.raises(LeaseNotFound):
        store.put("l/a", 1, lease=987654321)
    assert store.get("l/a") is None


def test_a_put_without_the_lease_detaches_the_key(store):
    lease = store.lease_grant(30)
    store.put("l/a", 1, lease=lease)
    store.put("l/a", 2)
    store.lease_revoke(lease)
    assert store.get("l/a").value == 2


def test_lease_ttl_must_be_positive(store):
    with pytest.raises(StoreError, match="positive"):
        store.lease_grant(0)
