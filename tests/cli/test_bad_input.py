"""Bad input through the CLI and the API: each gets a clear error and leaves the store unchanged."""

from __future__ import annotations

import json

import pytest

WEB = """\
service web {
    image nginx:1.27
    instances 2
    config { file "/etc/app.conf" from "conf/app.conf" }
}
"""


def _revision(cluster) -> int:
    return json.loads(cluster.cca("status", "-o", "json").output)["revision"]


def _state_keys(cluster) -> list[str]:
    out = []
    for kind in ("services", "secrets", "policies"):
        out += [r["key"] for r in json.loads(cluster.cca("get", kind, "-A", "-o", "json").output or "[]")]
    return out


def test_files_named_with_from_are_sent_by_the_client(cli_cluster, tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "app.conf").write_text("listen 8080\n")
    (tmp_path / "web.cca").write_text(WEB)
    result = cli_cluster.cca("apply", str(tmp_path / "web.cca"))
    assert result.exit_code == 0, result.output
    doc = json.loads(cli_cluster.cca("get", "services", "web", "-o", "json").output)[0]["value"]
    assert doc["config"]["files"][0]["content"] == "listen 8080\n"


@pytest.mark.parametrize("text,message", [
    pytest.param("service web {\n    image nginx\n    instnaces 3\n}\n", "instnaces", id="unknown-field"),
    pytest.param("service ../x {\n    image nginx\n}\n", "bad.cca:1", id="path-like-name"),
    pytest.param("gizmo g {\n}\n", "bad.cca:1", id="unknown-block"),
    pytest.param(WEB.replace("conf/app.conf", "../../etc/passwd"), "leaves the directory", id="from-escapes"),
])
def test_bad_sources_are_refused_with_file_line_and_nothing_written(cli_cluster, tmp_path, text, message):
    before = _state_keys(cli_cluster)
    (tmp_path / "bad.cca").write_text(text)
    result = cli_cluster.cca("apply", str(tmp_path / "bad.cca"))
    assert result.exit_code == 1 and message in result.output, result.output
    assert "Traceback" not in result.output
    assert _state_keys(cli_cluster) == before


@pytest.mark.parametrize("args,message", [
    pytest.param(["delete", "gizmo", "x"], "unknown kind", id="unknown-kind"),
    pytest.param(["delete", "service", "../x"], "not a valid name", id="path-like-name"),
    pytest.param(["delete", "service", "nothere"], "not found", id="missing"),
    pytest.param(["describe", "service", "a/b/c"], "more than one", id="deep-name"),
])
def test_bad_deletes_and_names(cli_cluster, args, message):
    result = cli_cluster.cca(*args)
    assert result.exit_code == 1 and message in result.output, result.output


def test_a_policy_that_does_not_ground_is_refused(cli_cluster, tmp_path):
    bad = tmp_path / "bad.lp"
    bad.write_text("deny(x, (S,)) :- service(S), not undefined_thing(S, 1, 2, 3).\n")
    result = cli_cluster.cca("policy", "apply", str(bad))
    assert result.exit_code == 1 and "bad" in result.output and "undefined_thing" in result.output
    syntax = tmp_path / "syntax.lp"
    syntax.write_text("deny(x :- .\n")
    result = cli_cluster.cca("policy", "apply", str(syntax))
    assert result.exit_code == 1 and "syntax" in result.output
    assert "syntax" not in cli_cluster.cca("policy", "list").output


def test_oversized_apply_is_refused(cli_cluster, tmp_path):
    for name in ("a", "b"):  # each file is under the language's 4 MiB, together over the request limit
        padding = "# " + "x" * (2560 * 1024) + "\n"
        (tmp_path / f"{name}.cca").write_text(padding + f"service {name} {{ image x }}\n")
    result = cli_cluster.cca("apply", str(tmp_path))
    assert result.exit_code == 1 and "larger than max" in result.output, result.output
    assert _state_keys(cli_cluster) == []


def test_watch_is_resumable_by_revision(cli_cluster, tmp_path):
    from ccattler.engine.api.client import Client
    from ccattler.engine.clientconfig import load_config

    (tmp_path / "a.cca").write_text("service web { image nginx:1 }\n")
    cli_cluster.cca("apply", str(tmp_path / "a.cca"))
    first = _revision(cli_cluster)
    (tmp_path / "a.cca").write_text("service web { image nginx:2 }\n")
    cli_cluster.cca("apply", str(tmp_path / "a.cca"))
    with Client(load_config(cli_cluster.home).context()) as api:
        stream = api.watch("desired/service/", first)
        event = next(stream)
    assert event["key"] == "desired/service/default/web" and event["value"]["image"] == "nginx:2"
    assert event["revision"] > first


def test_templates_dry_run_and_delete_by_file(cli_cluster, tmp_path, monkeypatch):
    template = "service {{ name }} {\n    image {{ image }}\n    instances {{ n }}\n}\n"
    (tmp_path / "app.cca").write_text(template)
    (tmp_path / "values.ccv").write_text('name = "api"\nimage = "nginx:1.27"\nn = 1\n')
    monkeypatch.setenv("APP_IMAGE", "nginx:1.28")
    args = ["--values", str(tmp_path / "values.ccv"), "--set", "n=3", "--set-from-env", "image=APP_IMAGE"]
    dry = cli_cluster.cca("apply", str(tmp_path / "app.cca"), *args, "--dry-run")
    assert dry.exit_code == 0 and "service api created (dry run)" in dry.output, dry.output
    assert _state_keys(cli_cluster) == []
    assert cli_cluster.cca("apply", str(tmp_path / "app.cca"), *args).exit_code == 0
    doc = json.loads(cli_cluster.cca("get", "services", "api", "-o", "json").output)[0]["value"]
    assert (doc["image"], doc["instances"]) == ("nginx:1.28", 3)
    missing = cli_cluster.cca("apply", str(tmp_path / "app.cca"))
    assert missing.exit_code == 1 and "name" in missing.output  # undefined template value, named
    (tmp_path / "app.cca").write_text("service api { image x }\n")
    deleted = cli_cluster.cca("delete", "-f", str(tmp_path / "app.cca"))
    assert deleted.exit_code == 0 and "service api deleted" in deleted.output, deleted.output
    assert _state_keys(cli_cluster) == []
