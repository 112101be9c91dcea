from typer.testing import CliRunner

from ccattler.cli.main import app


def test_version_prints_package_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("cca 0.")


def test_help_lists_usage():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output
