"""`cca benchmark` passes its options to bench/cluster_bench.py; bad options are a usage error."""

from __future__ import annotations

from typer.testing import CliRunner

from ccattler.cli.main import app


def test_a_bad_option_value_is_a_usage_error_naming_it():
    result = CliRunner().invoke(app, ["benchmark", "--nodes", "many"])
    assert result.exit_code == 2
    assert "--nodes" in result.output and "invalid int value" in result.output
