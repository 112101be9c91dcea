"""Operator `.lp` policies through `PolicyApply` on a real server: a corpus of broken programs
(bytes, encodings, syntax, unsafe variables, forbidden directives, unknown predicates, deep
nesting, oversize) and mutations of valid ones. Each is stored or refused with INVALID_ARGUMENT
naming `<name>.lp`; a refusal stores nothing; the server keeps serving; a policy that denies
everything can still be deleted by the admin (break-glass).

Every validation runs in a child process (~1 s), so the counts are small; programs that exhaust
the 10 s grounding budget are tests/engine/admission/test_policy_isolation.py's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from tests.fuzz.abuse import assert_alive, examples, outcome_is_clean, raw_unary, state

VALID = [
    'deny(latest_tag, (S, T)) :- service(S), image_tag(S, T), T == "latest".\n',
    'big(S) :- service_instances(S, N), N > 5.\ndeny(too_big, (S,)) :- big(S).\n',
    'deny(exec_data, (N,)) :- request(exec, service, N), resource_attr(N, "tags.tier", "data").\n',
]

BROKEN = [
    pytest.param("é", id="one-non-ascii-byte"),
    pytest.param("deny(x, (Y,)) :- service(S). % é\u202e\n", id="unsafe-with-unicode-comment"),
    pytest.param("deny(x, (S,)) :- service(S)\n", id="syntax"),
    pytest.param("deny(x, (S,)) :- not service(S).\n", id="unsafe-variable"),
    pytest.param("deny(x, (S,)) :- servce(S).\n", id="unknown-predicate"),
    pytest.param('#script (python)\nimport os\n#end.\n', id="script"),
    pytest.param('#include "/etc/passwd".\n', id="include"),
    pytest.param("%* never closed\ndeny(x, ()).\n", id="open-comment"),
    pytest.param("deny(x, (" + "f(" * 3000 + "1" + ")" * 3000 + ",)).\n", id="deep-nesting"),
    pytest.param("deny(x, (Y,)) :- " + ", ".join(f"service(S{i})" for i in range(300)) + ".\n",
                 id="wide-unsafe-body"),
    pytest.param("a" * (300 * 1024), id="oversize"),
    pytest.param("\x00deny(x, ()).\n", id="nul"),
    pytest.param('deny(x, ("' + "\\" * 999 + '",)).\n', id="escapes"),
]


def apply_policy(server, admin, name: str, text: str):
    before = state(server.store)
    payload = api_pb2.PolicyRequest(name=name, text=text).SerializeToString()
    reply = raw_unary(admin.channel, "Cluster", "PolicyApply", payload, timeout=30)
    stored = outcome_is_clean(reply, server.store, before, f"PolicyApply {text[:60]!r}")
    if not stored:
        said = reply.details()  # names the file, or the request field the wire check refused
        assert f"{name}.lp" in said or "name" in said or "PolicyRequest" in said, said
    else:  # whatever it says, the admin can remove it again
        admin.json("PolicyDelete", api_pb2.PolicyRequest(name=name))
        assert server.store.get(f"desired/lp/{name}") is None
    assert_alive(admin.channel)
    return stored


@pytest.mark.parametrize("text", BROKEN)
def test_broken_programs_are_refused_naming_the_file(server, admin, text):
    assert not apply_policy(server, admin, "broken", text)


def test_invalid_utf8_on_the_wire_is_refused(server, admin):
    before = state(server.store)
    payload = b"\x0a\x01p\x12\x03\xff\xfe\xe9"  # name "p", text with bytes that are not UTF-8
    reply = raw_unary(admin.channel, "Cluster", "PolicyApply", payload)
    assert not outcome_is_clean(reply, server.store, before, "PolicyApply with invalid UTF-8")
    assert_alive(admin.channel)


def test_a_policy_denying_everything_can_still_be_deleted(server, admin):
    admin.json("PolicyApply", api_pb2.PolicyRequest(name="all-denied", text="deny(all_denied, ()).\n"))
    try:
        assert admin.json("Get", api_pb2.GetRequest(kind="nodes"))["items"] == []  # break-glass: node status
        assert "services" in admin.json("Status")  # and cluster status
    finally:
        admin.json("PolicyDelete", api_pb2.PolicyRequest(name="all-denied"))
    assert server.store.get("desired/lp/all-denied") is None


@st.composite
def mutated_policy(draw):
    text = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        piece = draw(st.one_of(st.sampled_from(["(", ")", ".", ":-", "not ", ",", "#", "%", "\"", "X",
                                                "1..", "é", "\\", "#show", "{", "}", "deny(", "_"]),
                               st.text(max_size=6)))
        cut = draw(st.integers(0, 3))
        text = text[:at] + piece + text[at + cut:]
    return text


@examples(5)
@given(text=mutated_policy(), name=st.sampled_from(["p", "p-1", "x.y", "é", "a/b", "", "..", "x" * 80]))
def test_mutated_policies_are_stored_or_refused_cleanly(server, admin, text, name):
    apply_policy(server, admin, name, text)
