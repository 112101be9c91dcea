""".cca sources through lint (in process) and Diff/Apply (over mutual TLS to a real server):
mutations of the examples and golden files, odd values, token soup. Lint raises nothing (its
findings are diagnostics); apply succeeds or refuses with a documented status and changes
nothing; what lint calls an error, apply refuses as INVALID_ARGUMENT (one set of checks)."""

from __future__ import annotations

import grpc
from hypothesis import given
from hypothesis import strategies as st

from ccattler.dsl import Source
from ccattler.dsl.lint import lint_sources
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from tests.dsl.test_fuzz import HERE, TOKENS, mutated, value_mutated
from tests.fuzz.abuse import assert_alive, examples, outcome_is_clean, raw_unary, state

TENANTS = st.sampled_from(["", "default", "shop", "payments", "a/b", "é", "..", "x" * 70])


def lint_errors(text: str, tenant: str) -> list:
    try:
        diagnostics = lint_sources([Source("fuzz.cca", text, HERE / "golden")], tenant=tenant or "default")
    except Exception as exc:  # lint must report, never raise (the CLI would print a traceback)
        raise AssertionError(f"lint raised {type(exc).__name__}: {exc} on {text[:200]!r}") from exc
    return [d for d in diagnostics if d.severity == "error"]


def submit(server, admin, method: str, text: str, tenant: str):
    request = api_pb2.ApplyRequest(sources=[api_pb2.Source(path="fuzz.cca", text=text)], tenant=tenant)
    before = state(server.store)
    reply = raw_unary(admin.channel, "Cluster", method, request.SerializeToString(), timeout=30)
    ok = outcome_is_clean(reply, server.store, before, f"{method} {text[:120]!r}")
    if method == "Diff" and ok:
        assert state(server.store) == before, "Diff wrote to the store"
    assert_alive(admin.channel)
    return reply


def check(server, admin, text: str, tenant: str) -> None:
    valid_tenant = tenant in ("", "default", "shop", "payments")
    errors = lint_errors(text, tenant) if valid_tenant else []
    submit(server, admin, "Diff", text, tenant)
    reply = submit(server, admin, "Apply", text, tenant)
    if errors:
        assert isinstance(reply, grpc.RpcError) and reply.code() == grpc.StatusCode.INVALID_ARGUMENT, \
            f"lint found {errors[0].message!r} but apply answered {reply!r}"


@examples(25)
@given(text=mutated(), tenant=TENANTS)
def test_mutated_sources_through_lint_and_apply(server, admin, text, tenant):
    check(server, admin, text, tenant)


@examples(20)
@given(text=value_mutated(), tenant=st.just(""))
def test_odd_values_through_lint_and_apply(server, admin, text, tenant):
    check(server, admin, text, tenant)


@examples(10)
@given(text=st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join))
def test_token_soup_through_apply(server, admin, text):
    check(server, admin, text, "")
