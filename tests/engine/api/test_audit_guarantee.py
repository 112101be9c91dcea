"""Issue 12 class 4: every change is audited or it does not happen. Records are bounded
(summarised, never dropped); a call whose record cannot be written is refused and changes nothing."""

from __future__ import annotations

import grpc
import pytest

from ccattler.dsl.sources import Source
from ccattler.engine.api import audit
from ccattler.engine.api.client import ApiError
from ccattler.engine.api.gen.ccattler.v1 import api_pb2

SERVICE = 'service web {\n  image "busybox:1"\n  instances 2\n}\n'


def records(store):
    return [f.value for f in store.range("audit/")[0]]


def state(store):
    return {f.key: f.value for f in store.range("")[0] if not f.key.startswith("audit/")}


def test_an_empty_apply_is_invalid_argument_and_audited(cluster):
    with cluster.client() as client, pytest.raises(ApiError) as err:
        client.unary(client.cluster, "Apply", api_pb2.ApplyRequest())
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [(r["verb"], r["object"], r["decision"]) for r in records(cluster.store)] == [
        ("Apply", "no files", "failed")]


def test_a_successful_apply_leaves_one_record_with_its_outcome(cluster):
    with cluster.client() as client:
        client.apply([Source("web.cca", SERVICE)])
    [record] = records(cluster.store)
    assert (record["verb"], record["object"], record["decision"]) == ("Apply", "files web.cca", "allowed")


def test_a_record_of_many_long_files_is_summarised_not_dropped(cluster):
    sources = [api_pb2.Source(path=f"{i:04d}-" + "p" * 300 + ".cca", text="") for i in range(1000)]
    with cluster.client() as client:
        client.unary(client.cluster, "Apply", api_pb2.ApplyRequest(sources=sources, dry_run=True))
    [record] = records(cluster.store)
    assert len(record["object"]) <= audit.MAX_OBJECT_CHARS + 100
    assert record["object"].startswith("files 0000-pp") and "in all)" in record["object"]


def test_a_long_error_is_kept_bounded_in_the_record(cluster):
    bad = "".join(f"service s{i} {{ instances -1 }}\n" for i in range(400))
    with cluster.client() as client, pytest.raises(ApiError):
        client.apply([Source("bad.cca", bad)])
    [record] = records(cluster.store)
    assert record["decision"] == "failed" and len(record["reason"]) <= audit.MAX_REASON_CHARS + 50


@pytest.mark.parametrize("call", ["apply", "secret", "policy", "user", "token"])
def test_a_change_whose_record_cannot_be_written_is_refused(cluster, monkeypatch, call):
    def broken(self, entry):
        raise OSError("disk full")

    before = state(cluster.store)
    monkeypatch.setattr(audit.AuditLog, "record", broken)
    with cluster.client() as client, pytest.raises(ApiError) as err:
        if call == "apply":
            client.apply([Source("web.cca", SERVICE)])
        elif call == "secret":
            client.json("SecretSet", api_pb2.SecretRequest(name="db", value=b"pw"))
        elif call == "policy":
            client.json("PolicyApply", api_pb2.PolicyRequest(name="p", text="deny(x, ()) :- #false."))
        elif call == "user":
            client.json("UserCreate", api_pb2.UserRequest(name="ann"))
        else:
            client.unary(client.cluster, "TokenCreate", api_pb2.TokenRequest())
    assert err.value.code == grpc.StatusCode.UNAVAILABLE
    assert "audit record could not be written" in str(err.value) and "nothing was changed" in str(err.value)
    assert state(cluster.store) == before
    monkeypatch.undo()
    with cluster.client() as client:  # the server serves on once the audit log works again
        assert client.apply([Source("web.cca", SERVICE)])
    assert state(cluster.store) != before


def test_reads_are_not_refused_when_the_audit_log_fails(cluster, monkeypatch):
    monkeypatch.setattr(audit.AuditLog, "record", lambda self, entry: (_ for _ in ()).throw(OSError("x")))
    with cluster.client() as client:
        assert client.get("services")["items"] == []
