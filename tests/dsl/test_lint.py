"""`lint_sources` and `cca lint`/`fmt`/`render`: examples lint clean, warnings, --strict, JSON."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ccattler.cli.main import app
from ccattler.dsl import Source, lint_sources, load_sources

EXAMPLES = Path(__file__).parents[2] / "examples"
runner = CliRunner()


def test_every_example_lints_clean():
    assert lint_sources(load_sources([EXAMPLES]), strict=True) == []


def test_warnings_do_not_fail_but_strict_does():
    sources = [Source("w.cca", "service w { image nginx:latest }", None)]
    found = lint_sources(sources)
    assert {(d.code, d.severity) for d in found} == {("latest-tag", "warning"), ("no-resources", "warning")}
    assert {d.severity for d in lint_sources(sources, strict=True)} == {"error"}


def test_references_across_files_resolve():
    sources = [Source("a.cca", "secret db", None),
               Source("b.cca", "service w { image x:1  resources { cpu 1 memory 1Gi }  secret db }", None)]
    assert lint_sources(sources) == []


def test_cli_lint_examples_exit_0():
    result = runner.invoke(app, ["lint", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ok: ")


def test_undeclared_reference_suggests_a_declared_name():
    text = ("secret database.password\n"
            "service a { image x:1  resources { cpu 1 memory 1Gi }  secret databse.password }")
    sources = [Source("a.cca", text, None)]
    (diag,) = lint_sources(sources)
    assert diag.code == "undeclared" and diag.suggestion == 'did you mean "database.password"?'


def test_cli_fmt_reads_stdin():
    result = runner.invoke(app, ["fmt", "-"], input="service a { image x }")
    assert result.exit_code == 0 and result.stdout == "service a {\n    image x\n}\n"


def test_cli_lint_reports_errors_and_exits_1(tmp_path):
    bad = tmp_path / "bad.cca"
    bad.write_text("service web {\n    image nginx:1\n    instnaces 3\n}\n")
    result = runner.invoke(app, ["lint", str(bad)])
    assert result.exit_code == 1
    assert f'{bad}:3:5: error: unknown field "instnaces" in service "web"; did you mean "instances"?' \
        in result.output
    assert "    ^^^^^^^^^" in result.output


def test_cli_lint_json(tmp_path):
    (tmp_path / "w.cca").write_text("service w { image nginx:latest  resources { cpu 1 memory 1Gi } }")
    result = runner.invoke(app, ["lint", str(tmp_path), "-o", "json"])
    assert result.exit_code == 0
    (diag,) = json.loads(result.output)
    assert (diag["code"], diag["line"], diag["column"], diag["severity"]) == ("latest-tag", 1, 19, "warning")
    strict = runner.invoke(app, ["lint", str(tmp_path), "-o", "json", "--strict"])
    assert strict.exit_code == 1


@pytest.mark.parametrize("junk", [b"\x00\x01\x02binary", b"\xff\xfe\xfa not utf-8", b"service \"open"],
                         ids=["nul", "not-utf8", "unterminated"])
def test_cli_lint_bad_input_is_a_clear_error(tmp_path, junk):
    path = tmp_path / "junk.cca"
    path.write_bytes(junk)
    result = runner.invoke(app, ["lint", str(path)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"{path}:1:" in result.output


def test_cli_lint_huge_file(tmp_path):
    path = tmp_path / "huge.cca"
    path.write_bytes(b"# " + b"x" * (10 * 1024 * 1024))
    result = runner.invoke(app, ["lint", str(path)])
    assert result.exit_code == 1
    assert "the limit is 4 MiB" in result.output


def test_cli_fmt_check_and_write(tmp_path):
    path = tmp_path / "a.cca"
    path.write_text("service a { image x }\n")
    check = runner.invoke(app, ["fmt", "--check", str(path)])
    assert check.exit_code == 1 and f"{path}: not formatted" in check.output
    assert runner.invoke(app, ["fmt", "-w", str(path)]).exit_code == 0
    assert path.read_text() == "service a {\n    image x\n}\n"
    assert runner.invoke(app, ["fmt", "--check", str(path)]).exit_code == 0
    shown = runner.invoke(app, ["fmt", str(path)])
    assert shown.exit_code == 0 and shown.stdout == path.read_text()


def test_cli_fmt_syntax_error(tmp_path):
    path = tmp_path / "a.cca"
    path.write_text("service a { imag x }\n")
    result = runner.invoke(app, ["fmt", str(path)])
    assert result.exit_code == 1
    assert f'{path}:1:13: error: unknown field "imag"' in result.output
    assert path.read_text() == "service a { imag x }\n"


def test_cli_render_with_values(tmp_path):
    (tmp_path / "api").mkdir()
    (tmp_path / "api.cca").write_text("service {{ name }} { image {{ image }}  instances {{ n }} }\n")
    (tmp_path / "api" / "values.ccv").write_text('name = "api"\nimage = "app:1"\nn = 1\n')
    result = runner.invoke(app, ["render", str(tmp_path / "api.cca"), "--set", "n=4"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "service api { image app:1  instances 4 }\n"
    bad = runner.invoke(app, ["render", str(tmp_path / "api.cca"), "--set", "novalue"])
    assert bad.exit_code == 2


def test_names_resolve_to_objects_the_cluster_holds():
    from ccattler.dsl import compile_with_diagnostics

    text = "service payments/api { image x:1  resources { cpu 1 memory 1Gi }  secret db  secret gone }"
    cluster = {("secret", "default", "db")}
    facts, found = compile_with_diagnostics([Source("a.cca", text, None)],
                                            known=lambda kind, tenant, name: (kind, tenant, name) in cluster)
    secrets = facts["desired/service/payments/api"]["secrets"]
    assert [s["name"] for s in secrets] == ["default/db", "payments/gone"]
    assert [(d.code, d.severity, d.column) for d in found] == [("undeclared", "error", 85)]
    assert "declared neither in the files given nor in the cluster" in found[0].message


def test_role_scopes_are_paths():
    ok = [Source("r.cca", "role developer { allow workload.read  scope team/payments  scope shop }", None)]
    assert lint_sources(ok, strict=True) == []
    bad = [Source("r.cca", "role developer { allow workload.read  scope team//Pay }", None)]
    (found,) = lint_sources(bad)
    assert found.code == "bad-name" and "team//Pay" in found.message
