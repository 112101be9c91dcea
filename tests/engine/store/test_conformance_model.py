"""Conformance by model: random op sequences on each backend agree with a dict-per-revision model.

After every write the model records the whole state at the new revision; then `range` at each
revision still kept, and a watch replaying from the start, must match it exactly.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccattler.engine.store import Compare

pytestmark = pytest.mark.store

KEYS = st.sampled_from(["a", "b", "c/d", "c/e"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, st.integers(0, 9)),
        st.tuples(st.just("delete"), KEYS, st.none()),
        st.tuples(st.just("cas"), KEYS, st.integers(0, 9)),  # compare on the current mod revision
        st.tuples(st.just("stale"), KEYS, st.integers(0, 9)),  # compare on a wrong revision: fails
        st.tuples(st.just("txn"), st.lists(KEYS, min_size=1, max_size=3, unique=True), st.integers(0, 9)),
        st.tuples(st.just("compact"), st.none(), st.none()),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_operations_match_the_model(store, ops):
    root = f"m{uuid.uuid4().hex[:8]}/"
    start = store.revision()
    state: dict[str, int] = {}
    mods: dict[str, int] = {}
    history: dict[int, dict[str, int]] = {start: {}}
    events: list[tuple[str, str, int | None, int | None]] = []
    compacted = 0

    def record(revision, changes):
        for kind, key, value in changes:
            events.append((kind, key, value, state.get(key)))
            if kind == "put":
                state[key], mods[key] = value, revision
            else:
                state.pop(key, None)
                mods.pop(key, None)
        history[revision] = dict(state)

    for kind, key, value in ops:
        if kind == "put":
            record(store.put(root + key, value), [("put", key, value)])
        elif kind == "delete":
            revision = store.delete(root + key)
            if key in state:
                record(revision, [("delete", key, None)])
        elif kind in ("cas", "stale"):
            expected = mods.get(key, 0) + (1000 if kind == "stale" else 0)
            succeeded, revision = store.txn([Compare(root + key, expected)], {root + key: value})
            assert succeeded == (kind == "cas")
            if succeeded:
                record(revision, [("put", key, value)])
        elif kind == "txn":
            puts, deletes = key[:-1], key[-1:]
            succeeded, revision = store.txn((), {root + k: value for k in puts}, [root + k for k in deletes])
            changes = [("put", k, value) for k in puts] + [("delete", k, None) for k in deletes if k in state]
            if changes:
                record(revision, changes)
            else:
                assert revision == store.revision()
        else:
            compacted = store.revision()
            store.compact(compacted)

    for revision, expected in history.items():
        if revision >= compacted:
            facts, at = store.range(root, revision)
            assert at == revision
            assert {fact.key[len(root):]: fact.value for fact in facts} == expected, f"at revision {revision}"
    assert {fact.key[len(root):]: fact.value for fact in store.range(root)[0]} == state

    if not compacted:
        with store.watch(root, start) as watch:
            seen = [watch.get(timeout=5) for _ in events]
        assert [(e.kind, e.key[len(root):], e.value, e.prev_value) for e in seen] == events
