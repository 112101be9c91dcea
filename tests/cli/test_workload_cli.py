"""The CLI the seed names, against a real server: `cca scale` (an override the next apply
replaces; refused for autoscaled and grouped services), `cca login/logout/whoami`, `cca watch`
with documents, nodes' labels/restrictions/zone in `get -o wide` and `describe`, kind typos."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time

import yaml

from tests.cli.conftest import CCA

APP = """
service web {
    image busybox
    instances 2
    resources { cpu 100m  memory 32Mi }
}
service auto {
    image busybox
    resources { cpu 100m  memory 32Mi }
    scale { horizontal { min 1  max 5  target cpu = 60 } }
}
service side-a {
    image busybox
    resources { cpu 100m  memory 32Mi }
}
service side-b {
    image busybox
    resources { cpu 100m  memory 32Mi }
}
group pair { service side-a  service side-b }
node n1 { zone eu-1a  label disk = ssd  restrict gpu }
"""


def service_doc(cluster, name: str) -> dict:
    out = cluster.cca("get", "services", name, "-o", "json")
    assert out.exit_code == 0, out.output
    return json.loads(out.output)[0]["value"]


def test_scale_is_an_override_the_next_apply_replaces(cli_cluster, tmp_path) -> None:
    app = tmp_path / "app.cca"
    app.write_text(APP)
    assert cli_cluster.cca("apply", str(app)).exit_code == 0
    done = cli_cluster.cca("scale", "web", "5")
    assert done.exit_code == 0 and "scaled to 5" in done.output and "next `cca apply`" in done.output
    doc = service_doc(cli_cluster, "web")
    assert doc["instances"] == 5 and doc["scaled"] == {"instances": 5, "declared": 2, "by": "admin"}
    assert "already runs 5" in cli_cluster.cca("scale", "web", "5").output
    assert cli_cluster.cca("apply", str(app)).exit_code == 0  # the file's count again
    doc = service_doc(cli_cluster, "web")
    assert doc["instances"] == 2 and "scaled" not in doc

    auto = cli_cluster.cca("scale", "auto", "3")
    assert auto.exit_code == 1 and "the autoscaler sets its count within min 1 / max 5" in auto.output
    grouped = cli_cluster.cca("scale", "side-a", "3")
    assert grouped.exit_code == 1 and "is in group" in grouped.output
    missing = cli_cluster.cca("scale", "nope", "3")
    assert missing.exit_code == 1 and "service nope not found" in missing.output
    assert cli_cluster.cca("scale", "web", "-1").exit_code != 0
    assert "scale web to 5" in cli_cluster.cca("audit", "-o", "json").output


def test_login_whoami_logout(cli_cluster) -> None:
    assert cli_cluster.cca("user", "create", "carol", "--team", "shop").exit_code == 0
    token = cli_cluster.cca("user", "token", "carol").output.splitlines()[0]
    server = f"127.0.0.1:{cli_cluster.port}"
    done = cli_cluster.cca("login", "--server", server, "--token", token, "--context", "carol")
    assert done.exit_code == 0 and "as carol (user)" in done.output, done.output
    config = cli_cluster.home / "config.yaml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    saved = yaml.safe_load(config.read_text())
    assert saved["current-context"] == "carol" and saved["contexts"]["carol"]["token"] == token
    me = cli_cluster.cca("whoami")
    assert me.exit_code == 0 and "name:    carol" in me.output and "team:    shop" in me.output
    assert "context: carol" in me.output and "auth:    token" in me.output
    as_json = json.loads(cli_cluster.cca("whoami", "-o", "json").output)
    assert as_json["kind"] == "user" and as_json["server"] == server

    bad = cli_cluster.cca("login", "--server", server, "--token", "not-a-token", "--context", "mallory")
    assert bad.exit_code == 1 and "mallory" not in yaml.safe_load(config.read_text())["contexts"]
    piped = cli_cluster.cca("login", "--server", server, "--context", "carol2", input=token + "\n")
    assert piped.exit_code == 0, piped.output

    assert cli_cluster.cca("logout").exit_code == 0
    assert "token" not in yaml.safe_load(config.read_text())["contexts"]["carol2"]
    again = cli_cluster.cca("logout")
    assert again.exit_code == 1 and "holds no token" in again.output
    assert cli_cluster.cca("whoami").exit_code == 1  # no credentials left in that context
    admin = cli_cluster.cca("whoami", "--context", saved["contexts"] and "default")
    assert admin.exit_code == 0 and "certificate" in admin.output, admin.output
    first = cli_cluster.cca("login", "--server", "127.0.0.1:1", "--token", "x", "--context", "other")
    assert first.exit_code == 1 and "give --ca FILE" in first.output


def test_watch_prints_documents_one_json_per_line(cli_cluster, tmp_path) -> None:
    import re

    app = tmp_path / "app.cca"
    app.write_text(APP)
    applied = cli_cluster.cca("apply", str(app))
    revision = int(re.search(r"revision (\d+)", applied.output).group(1))
    assert cli_cluster.cca("delete", "service", "web").exit_code == 0
    out = tmp_path / "watch.out"
    with open(out, "wb") as sink:  # from just before the apply: its events come from the history
        watcher = subprocess.Popen([CCA, "watch", "desired/service/", "-o", "json", "--from-revision",
                                    str(revision - 1)], env=os.environ | cli_cluster.env, stdout=sink,
                                   stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 20
        while out.read_text().count("\n") < 5 and time.time() < deadline:
            time.sleep(0.2)
    finally:
        watcher.terminate()
        watcher.wait(10)
    text = out.read_text()
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert events, text
    put = next(e for e in events if e["key"] == "desired/service/default/web" and e["operation"] == "put")
    assert put["value"]["instances"] == 2 and put["revision"] > 0
    assert any(e["key"] == "desired/service/default/web" and e["operation"] == "delete" for e in events)


def test_nodes_show_labels_restrictions_and_zone_from_either_source(tmp_path, capsys) -> None:
    from ccattler.cli import render
    from ccattler.cli._common import emit
    from ccattler.engine.api import views
    from ccattler.engine.store import open_store

    store = open_store(f"sqlite://{tmp_path}/nodes.db")
    try:  # an agent started with --label arch=x86 --restrict batch, and a declared `node n1 {…}`
        store.put("observed/node/n1", {"address": "10.0.0.1", "labels": {"arch": "x86"},
                                       "restrictions": ["batch"], "capacity": {"cpu": 2000}})
        store.put("desired/node/n1", {"kind": "node", "name": "n1", "zone": "eu-1a",
                                      "labels": {"disk": "ssd"}, "restrictions": ["gpu"]})
        rows = views.nodes(store)
    finally:
        store.close()
    columns, wide = render.COLUMNS["nodes"]
    emit(rows, columns, "wide", wide=wide)
    table = capsys.readouterr().out
    header, row = table.splitlines()[0], table.splitlines()[1]
    assert "LABELS" in header and "RESTRICTIONS" in header and "ZONE" in header
    assert "arch=x86,disk=ssd" in row and "batch,gpu" in row and "eu-1a" in row
    render.describe("nodes", rows[0])
    described = capsys.readouterr().out
    assert "Labels:           arch=x86,disk=ssd" in described
    assert "Restrictions:     batch, gpu" in described and "Zone:             eu-1a" in described


def test_kind_typos_suggest_the_nearest_kind(cli_cluster) -> None:
    typo = cli_cluster.cca("get", "instnces")
    assert typo.exit_code == 1 and "did you mean 'instances'?" in typo.output
    assert "did you mean 'gate'?" in cli_cluster.cca("delete", "gatte", "x").output
