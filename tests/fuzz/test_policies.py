"""Operator `.lp` policies through `PolicyApply` on a real server: a corpus of broken programs
(bytes, encodings, syntax, unsafe variables, forbidden directives, unknown predicates, deep
nesting, oversize) and mutations of valid ones. Each is stored or refused with INVALID_ARGUMENT
naming `<name>.lp`; a refusal stores nothing; the server keeps serving; a policy that denies
everything can still be deleted by the admin (break-glass).

Every validation runs in a child process (~1 s), so the counts are small; programs that exhaust
the 10 s grounding budget are tests/engine/admission/test_policy_isolation.py's.

At admission, policies that overrun their budget over real facts (the issue's 3^30 join, a
validated policy that explodes only on a service the fixture lacks, endless solving, a worker
killed mid-request) refuse that request with PERMISSION_DENIED naming `<name>.lp` and the budget,
audited as denied; the server answers every other call, and the admin removes the policy."""

from __future__ import annotations

import os
import signal
import threading
import time

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ccattler.engine.admission.policy_pool import PolicyLimits, configure, pool
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


JOIN_30 = ("deny(x, (" + ", ".join(f"S{i}" for i in range(30)) + ")) :- "
           + ", ".join(f"service(S{i})" for i in range(30)) + ".\n")
EXPLODES = [  # (text, stored without validation?, budget named)
    pytest.param(JOIN_30, True, "grounding time", id="issue-3^30-join"),
    pytest.param('deny(x, (' + ", ".join(f"S{i}" for i in range(20)) + ')) :- service("default/big"), '
                 + ", ".join(f"service(S{i})" for i in range(20)) + ".\n", False, "grounding time",
                 id="validated-then-explodes"),
    pytest.param('p(1..40). h(1..39).\n{ in(P, H) : h(H) } = 1 :- p(P), service("default/big").\n'
                 ':- h(H), #count { P : in(P, H) } > 1.\n', False, "solving time", id="endless-solving"),
]
SERVICES = "".join(f"service {n} {{ image registry.local:5000/{n}:1.0 }}\n" for n in ("a", "b", "big"))


def apply_services(admin, timeout: float = 60):
    request = api_pb2.ApplyRequest(sources=[api_pb2.Source(path="budget.cca", text=SERVICES)])
    return raw_unary(admin.channel, "Cluster", "Apply", request.SerializeToString(), timeout=timeout)


def audited(server, reason: str) -> list[dict]:
    return [f.value for f in server.store.range("audit/")[0]
            if f.value.get("decision") == "denied" and reason in f.value.get("reason", "")]


def refused_then_removed(server, admin, name: str, code: str, said: str) -> None:
    before = state(server.store)
    reply = apply_services(admin)
    assert isinstance(reply, grpc.RpcError) and reply.code() == grpc.StatusCode.PERMISSION_DENIED, reply
    details = reply.details()
    assert f"{name}.lp" in details and f"[{code}]" in details and said in details, details
    assert state(server.store) == before  # nothing applied
    assert audited(server, f"{name}.lp"), "the refusal is audited"
    assert_alive(admin.channel)
    assert "services" in admin.json("Status")  # break-glass: status, then removal
    admin.json("PolicyDelete", api_pb2.PolicyRequest(name=name))
    assert server.store.get(f"desired/lp/{name}") is None


@pytest.mark.parametrize(("text", "stored", "budget"), EXPLODES)
def test_a_policy_over_its_budget_at_admission_refuses_and_is_audited(server, admin, text, stored, budget):
    if stored:  # stands for a policy that passed a weaker validation: the old one-service fixture
        server.store.put("desired/lp/boom", {"kind": "lp", "name": "boom", "source": "boom.lp", "text": text})
    else:
        admin.json("PolicyApply", api_pb2.PolicyRequest(name="boom", text=text))
    refused_then_removed(server, admin, "boom", "policy_budget", f"{budget} budget")


def test_the_issue_example_is_refused_at_policy_apply_with_the_budget(server, admin):
    reply = raw_unary(admin.channel, "Cluster", "PolicyApply",
                      api_pb2.PolicyRequest(name="boom", text=JOIN_30).SerializeToString(), timeout=30)
    assert isinstance(reply, grpc.RpcError) and reply.code() == grpc.StatusCode.INVALID_ARGUMENT, reply
    assert "boom.lp" in reply.details() and "grounding time budget" in reply.details(), reply.details()
    assert server.store.get("desired/lp/boom") is None


def test_a_worker_killed_mid_request_refuses_only_that_request(server, admin):
    # Endless solving in little memory (no conflict budget for this test), so the kill ends it.
    configure(PolicyLimits(seconds=60.0, conflicts=None))
    try:
        text = "p(1..40). h(1..39).\n{ in(P, H) : h(H) } = 1 :- p(P), service(_).\n" \
               ":- h(H), #count { P : in(P, H) } > 1.\n"
        server.store.put("desired/lp/spin", {"kind": "lp", "name": "spin", "source": "spin.lp", "text": text})
        replies: list = []
        thread = threading.Thread(target=lambda: replies.append(apply_services(admin)))
        thread.start()
        time.sleep(1.5)  # solving by now
        for pid in pool().pids():  # the workers of the pool this test configured, the busy one among them
            os.kill(pid, signal.SIGKILL)
        thread.join(60)
        (reply,) = replies
        assert isinstance(reply, grpc.RpcError) and reply.code() == grpc.StatusCode.PERMISSION_DENIED, reply
        assert "spin.lp" in reply.details() and "[policy_crashed]" in reply.details(), reply.details()
        assert audited(server, "spin.lp")
        assert_alive(admin.channel)
        admin.json("PolicyDelete", api_pb2.PolicyRequest(name="spin"))
        assert not isinstance(apply_services(admin), grpc.RpcError)  # replacement workers judge the next
        sources = [api_pb2.Source(path="budget.cca", text=SERVICES)]
        admin.json("Delete", api_pb2.DeleteRequest(sources=sources))
    finally:
        configure(PolicyLimits())
