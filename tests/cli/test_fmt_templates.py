"""`cca fmt --check` of a template checks the text it renders to with its own values (the examples'
guarantee covers examples/templated/api.cca); printing or rewriting a template is still refused."""

from __future__ import annotations

from typer.testing import CliRunner

from ccattler.cli.main import app

CANONICAL = 'service {{ name }} {\n    image busybox\n    instances {{ n }}\n}\n'
SQUASHED = 'service {{ name }} {\n    image busybox\n    resources { cpu 1  memory 1Gi }\n}\n'


def _template(tmp_path, text: str):
    path = tmp_path / "api.cca"
    path.write_text(text)
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "values.ccv").write_text('name = "api"\nn = 2\n')
    return path


def test_check_of_a_template_checks_what_it_renders_to(tmp_path):
    assert CliRunner().invoke(app, ["fmt", "--check", str(_template(tmp_path, CANONICAL))]).exit_code == 0


def test_check_of_a_template_that_renders_squashed_fails(tmp_path):
    result = CliRunner().invoke(app, ["fmt", "--check", str(_template(tmp_path, SQUASHED))])
    assert result.exit_code == 1 and "not formatted" in result.output


def test_printing_or_rewriting_a_template_is_refused(tmp_path):
    path = _template(tmp_path, CANONICAL)
    for args in (["fmt", str(path)], ["fmt", "-w", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1 and "cca render" in result.output
    assert path.read_text() == CANONICAL
