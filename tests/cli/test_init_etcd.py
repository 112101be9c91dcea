"""`cca init --etcd a,b,c --etcd-pki DIR` writes a context naming the etcd cluster (with its mutual
TLS files) and every API server; `cca server`/`cca runner` take the store from it."""

from __future__ import annotations

from typer.testing import CliRunner

from ccattler.cli.main import app
from ccattler.engine.clientconfig import load_config


def test_init_etcd_writes_the_store_and_servers(tmp_path):
    pki = tmp_path / "pki"
    pki.mkdir()
    for name in ("ca.crt", "client.crt", "client.key"):
        (pki / name).write_text("pem")
    env = {"CCA_HOME": str(tmp_path / "home")}
    result = CliRunner().invoke(app, ["init", "--server", "127.0.0.1:7443,127.0.0.1:7445",
                                      "--etcd", "127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379",
                                      "--etcd-pki", str(pki)], env=env)
    assert result.exit_code == 0, result.output
    ctx = load_config(tmp_path / "home").context()
    assert ctx.server == "127.0.0.1:7443,127.0.0.1:7445"
    assert ctx.token_server == "127.0.0.1:7444,127.0.0.1:7446"
    assert ctx.store == (f"etcd://127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379?ca={pki}/ca.crt"
                         f"&cert={pki}/client.crt&key={pki}/client.key")


def test_init_etcd_refuses_a_bad_member_and_missing_files(tmp_path):
    env = {"CCA_HOME": str(tmp_path / "home")}
    bad = CliRunner().invoke(app, ["init", "--etcd", "127.0.0.1:2379,nope"], env=env)
    assert bad.exit_code != 0 and "'nope' is not host:port" in bad.output
    missing = CliRunner().invoke(app, ["init", "--etcd", "127.0.0.1:2379", "--etcd-pki", str(tmp_path)],
                                 env=env)
    assert missing.exit_code != 0 and "ca.crt" in missing.output
    assert not (tmp_path / "home" / "clusters" / "default").exists()  # nothing half-made


def test_runner_without_a_store_says_so(tmp_path):
    env = {"CCA_HOME": str(tmp_path / "home")}
    assert CliRunner().invoke(app, ["init"], env=env).exit_code == 0
    result = CliRunner().invoke(app, ["runner"], env=env)
    assert result.exit_code != 0 and "no store for context 'default'" in result.output
