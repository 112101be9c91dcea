"""Concurrent clients: parallel applies of different files all commit (admission re-judges on
conflict), and parallel secret writes to one name never lose a version."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ccattler.dsl import Source
from ccattler.engine.api.client import ApiError
from ccattler.engine.api.gen.ccattler.v1 import api_pb2


def test_parallel_applies_of_different_files_all_commit(cluster):
    def apply(i: int) -> int:
        with cluster.client() as client:
            text = f"service svc{i} {{ image nginx:1.{i}  instances 1 }}\n"
            return client.apply([Source(f"f{i}.cca", text)])["revision"]

    with ThreadPoolExecutor(8) as pool:
        revisions = list(pool.map(apply, range(8)))
    assert len(set(revisions)) == 8
    assert len(cluster.store.range("desired/service/")[0]) == 8


def test_parallel_secret_sets_keep_every_version_or_fail_clearly(cluster):
    def set_value(i: int) -> str:
        with cluster.client() as client:
            try:
                client.json("SecretSet", api_pb2.SecretRequest(name="shared", value=f"v{i}".encode()))
                return "ok"
            except ApiError as exc:
                assert "try again" in str(exc) and exc.retriable
                return "conflict"

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(set_value, range(6)))
    version = cluster.store.get("secret/default/shared").value["version"]
    assert version == outcomes.count("ok")
