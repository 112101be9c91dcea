"""Operator policies are checked in a child process with hard limits: bytes, encodings, sizes and
programs that would abort, hang or exhaust clingo give a `PolicyError` naming the file, and the
process that asked (the API server in production, this test process here) keeps running."""

from __future__ import annotations

import pytest
from admission_builders import ADMIN

from ccattler.engine.admission import PolicyError, apply_policy, list_policies, policies, probe
from ccattler.engine.admission.policy_pool import PolicyLimits
from ccattler.engine.solve.errors import MessageLog


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("é", r"bad\.lp:1:1"),  # the one byte: clingo cuts its message inside the character
        ("deny(x, ()) :- service(S).\nà\n", r"bad\.lp:2:1"),
        ("\udcff", r"bad\.lp:1:1"),  # a lone surrogate: not UTF-8 at all
        ("deny(x, ()) :- service(S), \x00.\n", r"bad\.lp"),
        ("deny(x, (S,)) :- Y > 1.\n", r"bad\.lp:1:\d+"),  # unsafe variables, with a location
        ("deny(x, (S,) :- service(S).\n", r"bad\.lp:1:\d+"),  # syntax error
    ],
)
def test_hostile_policy_text_is_refused_with_a_location(store, text, where):
    with pytest.raises(PolicyError, match=where):
        apply_policy(store, ADMIN, "bad", text)
    assert list_policies(store) == []


def test_endless_solving_is_ended_by_the_childs_limits(store, monkeypatch):
    monkeypatch.setattr(probe, "PROBE_SECONDS", 3.0)
    # A hard pigeonhole instance: no conflict budget is reached quickly enough to matter.
    text = ("p(1..40). h(1..39).\n{ in(P, H) : h(H) } = 1 :- p(P), service(_).\n"
            ":- h(H), #count { P : in(P, H) } > 1.\n")
    with pytest.raises(PolicyError, match=r"did not finish|checker died"):
        apply_policy(store, ADMIN, "bad", text)
    assert list_policies(store) == []


def test_oversized_policy_is_refused_before_any_child_runs(store, monkeypatch):
    monkeypatch.setattr(probe, "probe", lambda *a: pytest.fail("probe must not run"))
    text = "% x\n" * (policies.MAX_POLICY_BYTES // 4 + 1)
    with pytest.raises(PolicyError, match=r"bad\.lp: error: \d+ bytes, more than the 262144"):
        apply_policy(store, ADMIN, "bad", text)


def test_the_child_is_limited_in_memory(store, monkeypatch):
    monkeypatch.setattr(probe, "PROBE_MEMORY_BYTES", 300 << 20)
    # A long admission budget, so that memory (not the grounding time budget) is what runs out.
    monkeypatch.setattr(probe, "current_limits", lambda: PolicyLimits(seconds=30.0))
    text = "big(X, Y, Z) :- service(_), X = 1..3000, Y = 1..3000, Z = 1..3000.\n"
    with pytest.raises(PolicyError, match=r"did not finish|checker died|more than \d+ MiB"):
        apply_policy(store, ADMIN, "bad", text)


def test_a_good_policy_with_a_non_ascii_string_still_applies(store):
    text = 'deny(x, (S,)) :- service(S), image_tag(S, "é").\nmessage(x, "refusé {0}"). % café\n'
    apply_policy(store, ADMIN, "ok", text)
    assert [p.name for p in list_policies(store)] == ["ok"]


@pytest.mark.parametrize("message", [b"\xc3", b"\xff\xfe", "ok", None, 42, object()])
def test_the_logger_callback_never_raises(message):
    log = MessageLog()
    log.label = "x.lp"
    log(0, message)  # must not raise: clingo calls it from a nothrow callback
    assert len(log.messages) == 1


@pytest.mark.parametrize(("text", "where"), [
    ("é\n%! program: netpolicy\n", r"bad\.lp:1:1"),  # aborted clingo in the server before
    ("x(S) :- servce(S).\n%! program: netpolicy\n", r"bad\.lp:1:\d+: error: unknown predicate servce/1"),
])
def test_netpolicy_extensions_are_checked_in_the_child_too(store, text, where):
    with pytest.raises(PolicyError, match=where):
        apply_policy(store, ADMIN, "bad", text)
    assert list_policies(store) == []
