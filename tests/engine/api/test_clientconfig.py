"""Client contexts: several clusters side by side under CCA_HOME, overrides, clear config errors."""

import stat

import pytest

from ccattler.engine.clientconfig import ConfigError, Context, load_config, resolve_context, save_context


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CCA_HOME", str(tmp_path))
    for name in ("CCA_CONTEXT", "CCA_SERVER", "CCA_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_contexts_side_by_side_and_overrides(home, monkeypatch):
    save_context(Context("a", "10.0.0.1:7443", "/a/ca.crt", "10.0.0.1:7444", "/a/admin.crt", "/a/admin.key"))
    save_context(Context("b", "10.0.0.2:7443", "/b/ca.crt", "10.0.0.2:7444", "/b/admin.crt", "/b/admin.key"),
                 make_current=False)
    assert stat.S_IMODE((home / "config.yaml").stat().st_mode) == 0o600
    assert resolve_context().name == "a"
    assert resolve_context("b").server == "10.0.0.2:7443"
    monkeypatch.setenv("CCA_CONTEXT", "b")
    assert resolve_context().name == "b"
    moved = resolve_context(server="10.9.9.9:8000")
    assert (moved.server, moved.token_server) == ("10.9.9.9:8000", "10.9.9.9:8001")
    with_token = resolve_context(token="cca.abc.def")
    assert with_token.token == "cca.abc.def" and with_token.cert is None


def test_unknown_context_and_missing_config_are_clear(home):
    with pytest.raises(ConfigError, match="run `cca init`"):
        resolve_context()
    save_context(Context("a", "h:1", "/ca"))
    with pytest.raises(ConfigError, match="unknown context 'zz' \\(known: a\\)"):
        resolve_context("zz")


def test_malformed_config_names_the_file(home):
    (home / "config.yaml").write_text("contexts: [1, 2\n")
    with pytest.raises(ConfigError, match="config.yaml is not valid YAML"):
        load_config()
    (home / "config.yaml").write_text("contexts:\n  a: {server: h:1, ca: /x, colour: blue}\n")
    with pytest.raises(ConfigError, match="context 'a'"):
        load_config()


def test_cca_context_list_and_use(home):
    from typer.testing import CliRunner

    from ccattler.cli.main import app

    save_context(Context("a", "10.0.0.1:7443", "/a/ca.crt", cert="/a/admin.crt", key="/a/admin.key"))
    save_context(Context("b", "10.0.0.2:7443", "/b/ca.crt", token="cca.x.y"), make_current=False)
    listed = CliRunner().invoke(app, ["context", "list"])
    assert listed.exit_code == 0 and "* " in listed.output and "10.0.0.2:7443" in listed.output
    assert CliRunner().invoke(app, ["context", "use", "b"]).exit_code == 0
    assert load_config().current == "b"
    missing = CliRunner().invoke(app, ["context", "use", "zz"])
    assert missing.exit_code == 1 and "unknown context" in missing.output
