from __future__ import annotations

from ccattler.agent.slice_state import Reporter, SliceState


def test_slice_is_ready_once_synced_and_resync_starts_over() -> None:
    state = SliceState()
    assert state.apply({"kind": "put", "key": "a", "value": {"x": 1}, "revision": 3}) is False
    assert state.apply({"kind": "synced", "key": "", "value": None, "revision": 3}) is True
    assert state.apply({"kind": "delete", "key": "a", "value": None, "revision": 4}) is True
    assert (state.facts, state.revision) == ({}, 4)
    state.apply({"kind": "put", "key": "b", "value": {}, "revision": 5})
    assert state.apply({"kind": "resync", "key": "", "value": None, "revision": 9}) is False
    assert (state.facts, state.synced, state.revision) == ({}, False, 0)


def test_reporter_sends_only_changes_and_deletes_vanished() -> None:
    reporter = Reporter()
    first = reporter.changes({"o/a": {"state": "starting"}, "o/b": {"state": "running"}})
    assert first == {"o/a": {"state": "starting"}, "o/b": {"state": "running"}}
    reporter.sent(first)
    second = reporter.changes({"o/a": {"state": "running"}})
    assert second == {"o/a": {"state": "running"}, "o/b": None}
    reporter.sent(second)
    assert reporter.changes({"o/a": {"state": "running"}}) == {}


def test_documents_sent_as_json_are_decoded_when_first_read() -> None:
    state = SliceState()
    state.apply({"kind": "put", "key": "derived/endpoint/t/db", "value_json": '{"endpoints": []}',
                 "revision": 1})
    assert dict(state.facts) == {}  # not decoded yet
    assert state.facts.get("derived/endpoint/t/db") == {"endpoints": []}
    assert state.facts["derived/endpoint/t/db"] == {"endpoints": []}
    state.apply({"kind": "put", "key": "derived/endpoint/t/db", "value_json": '{"endpoints": [1]}',
                 "revision": 2})
    assert state.facts.get("derived/endpoint/t/db") == {"endpoints": [1]}  # the newer text wins
    state.apply({"kind": "delete", "key": "derived/endpoint/t/db", "value": None, "revision": 3})
    assert state.facts.get("derived/endpoint/t/db") is None and state.facts.get("missing", 7) == 7


def test_reading_a_lazy_document_while_iterating_the_slice_is_safe() -> None:
    state = SliceState()
    state.apply({"kind": "put", "key": "derived/placement/t/db-1", "value": {"node": "n1"}, "revision": 1})
    state.apply({"kind": "put", "key": "derived/endpoint/t/db", "value_json": '{"endpoints": []}',
                 "revision": 2})
    for _key, _value in state.facts.items():  # what desired_instances does
        assert state.facts.get("derived/endpoint/t/db") == {"endpoints": []}
