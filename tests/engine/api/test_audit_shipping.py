"""Audit a user can ship (issue 19 part 5): periodic secret refreshes coalesced, retention by
count and age, and a JSON-lines file sink rotated by size that never costs the store's record."""

from __future__ import annotations

import json
import os
import stat

from ccattler.dsl.sources import Source
from ccattler.engine.api.agent_client import AgentClient
from ccattler.engine.api.audit import AuditLog, AuditRecord
from ccattler.engine.api.audit_file import AuditFile
from ccattler.engine.secrets import LocalKeyProvider, set_secret

from .test_agent_calls import join

SERVICE = 'service web {\n  image "busybox:1"\n  instances 1\n}\n'


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def records(store, verb=None):
    rows = [f.value for f in store.range("audit/")[0]]
    return [r for r in rows if verb is None or r["verb"] == verb]


def _idle_node(cluster, tmp_path):
    """Node n1 running two instances of a service with a secret, as an idle cluster has."""
    keys = LocalKeyProvider.from_file(cluster.files.master_key)
    set_secret(cluster.store, keys, "db.password", "shop", b"one")
    cluster.store.txn((), [
        ("desired/service/shop/web", {"secrets": [{"name": "shop/db.password", "mount": "/run/secrets/db"}]}),
        ("derived/placement/shop/web-a1", {"service": "shop/web", "instance": "web-a1", "node": "n1"}),
        ("derived/placement/shop/web-a2", {"service": "shop/web", "instance": "web-a2", "node": "n1"}),
    ])
    client, _ = join(cluster, tmp_path, "n1")
    return client, keys


def test_an_idle_nodes_secret_refreshes_write_one_record_until_what_they_deliver_changes(cluster, tmp_path):
    clock = Clock()
    cluster.server.audit.clock = clock
    client, keys = _idle_node(cluster, tmp_path)
    refresh = ["shop/web-a1", "shop/web-a2"]
    with client:
        agent = AgentClient(client)
        for _ in range(20):  # 20 refresh ticks of an idle node (every ~16 s: 5 minutes)
            assert agent.fetch_secrets_many(refresh)["shop/web-a1"][0][1] == b"one"
            clock.now += 16
        [first] = records(cluster.store, "FetchSecrets")
        assert (first["principal"], first["decision"]) == ("n1", "allowed")
        assert "web-a1" in first["object"] and "web-a2" in first["object"]
        assert cluster.server.audit.coalesced == 19
        import urllib.request

        with urllib.request.urlopen(f"http://{cluster.server.metrics_listen}/metrics") as page:
            assert "cca_audit_coalesced 19.0" in page.read().decode()

        set_secret(cluster.store, keys, "db.password", "shop", b"two")  # what it delivers changes
        for _ in range(5):
            assert agent.fetch_secrets_many(refresh)["shop/web-a1"][0][1] == b"two"
            clock.now += 16
        assert len(records(cluster.store, "FetchSecrets")) == 2

        clock.now += 3600  # unchanged for an hour: recorded again, so retention never leaves it unrecorded
        agent.fetch_secrets_many(refresh)
        agent.fetch_secrets_many(refresh)
        assert len(records(cluster.store, "FetchSecrets")) == 3

        cluster.store.delete("derived/placement/shop/web-a2")  # moved away: a refusal, recorded once
        for _ in range(3):
            agent.fetch_secrets_many(refresh)
        assert len(records(cluster.store, "FetchSecrets")) == 4


def test_retention_by_count_and_by_age(cluster):
    clock = Clock()
    log = AuditLog(cluster.store, keep=50, prune_every=1000, max_age=3600, clock=clock)
    for i in range(30):  # one every 5 minutes for 2.5 hours
        log.record(AuditRecord(f"r{i:02d}", clock.now, "admin", "Apply", "x", "allowed"))
        clock.now += 300
    assert log.prune() == 30 - 12  # only the last hour's 12 remain
    kept = [r["request_id"] for r in records(cluster.store)]
    assert kept == [f"r{i:02d}" for i in range(18, 30)]
    log.keep = 5
    assert log.prune() == 7 and len(records(cluster.store)) == 5


def test_the_file_sink_rotates_by_size_and_keeps_n_files_of_json_lines(tmp_path):
    path = tmp_path / "audit" / "audit.log"
    sink = AuditFile(path, max_bytes=2048, backups=2)
    for i in range(100):
        assert sink.write({"request_id": f"r{i:03d}", "verb": "Apply", "object": "files é.cca" + "x" * 50})
    sink.close()
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["audit.log", "audit.log.1", "audit.log.2"]
    lines = []
    for name in ("audit.log.2", "audit.log.1", "audit.log"):
        file = path.parent / name
        assert file.stat().st_size <= 2048 and stat.S_IMODE(file.stat().st_mode) == 0o600
        lines += [json.loads(line) for line in file.read_text().splitlines()]
    ids = [line["request_id"] for line in lines]
    assert ids == sorted(ids) and ids[-1] == "r099"  # the newest, in order, nothing torn
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_the_server_ships_intent_and_outcome_lines_and_a_sink_failure_costs_no_record(make_cluster, tmp_path):
    path = tmp_path / "ship" / "audit.log"
    cluster = make_cluster(audit_log_path=str(path), audit_log_max_bytes=4096, audit_log_backups=1)
    with cluster.client() as client:
        client.apply([Source("web.cca", SERVICE)])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["verb"], r["decision"]) for r in lines] == [("Apply", "requested"), ("Apply", "allowed")]
    assert lines[0]["request_id"] == lines[1]["request_id"]
    [stored] = records(cluster.store)
    assert stored == lines[1]

    path.unlink()
    os.mkdir(path)  # the sink can no longer write its file
    cluster.server.audit.sink.close()
    with cluster.client() as client:
        client.apply([Source("web.cca", SERVICE.replace("instances 1", "instances 2"))])
    assert [r["decision"] for r in records(cluster.store)] == ["allowed", "allowed"]
    assert cluster.server.audit.sink.failures == 2
    assert cluster.store.get("desired/service/default/web").value["instances"] == 2


def test_an_audit_log_path_that_cannot_be_written_stops_the_server_from_starting(tmp_path):
    import pytest

    from ccattler.engine.api.server import ApiServer, ServerOptions
    from ccattler.engine.facts import CcaError
    from ccattler.engine.pki import init_cluster
    from ccattler.engine.store import open_store

    (tmp_path / "taken").mkdir()
    files = init_cluster(tmp_path / "pki", "127.0.0.1:7443")
    store = open_store(f"sqlite://{tmp_path}/state.db")
    try:
        options = ServerOptions(listen="127.0.0.1:0", token_listen="127.0.0.1:0", metrics_listen=None,
                                audit_log_path=str(tmp_path / "taken"))
        with pytest.raises(CcaError, match="cannot open the audit log file .*taken"):
            ApiServer(store, files, options)
    finally:
        store.close()


def test_cca_server_refuses_a_bad_audit_age_before_starting():
    from typer.testing import CliRunner

    from ccattler.cli.main import app

    result = CliRunner().invoke(app, ["server", "--audit-max-age", "soon"])
    assert result.exit_code == 2 and "is not a duration" in result.output
