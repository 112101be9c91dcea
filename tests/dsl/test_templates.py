"""Templates and values: sandboxed Jinja2, StrictUndefined, .ccv files, precedence."""

import pytest

from ccattler.dsl import DslError, load_sources
from ccattler.dsl.template import render
from ccattler.dsl.values import parse_values


def test_values_file_syntax():
    values = parse_values('# c\nname = "api"  // c\nn = 3\nr = 1.5\nok = true\nw = word\n'
                          'web.port = 8080\nweb.host = "h # not a comment"\nl = [a, "b", 3]\n', "v.ccv")
    assert values == {"name": "api", "n": 3, "r": 1.5, "ok": True, "w": "word",
                      "web": {"port": 8080, "host": "h # not a comment"}, "l": ["a", "b", 3]}


def test_values_file_errors_name_the_line():
    with pytest.raises(DslError) as err:
        parse_values('good = 1\nbad line\nx = "open\n', "v.ccv")
    assert [(d.line, d.code) for d in err.value.diagnostics] == [(2, "bad-values"), (3, "bad-values")]
    assert "unterminated string" in str(err.value)


def test_precedence(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app.cca").write_text("# {{ a }} {{ b }} {{ c }} {{ d }} {{ nested.x }} {{ nested.y }}\n")
    (tmp_path / "app" / "values.ccv").write_text("a = 0\nb = 0\nc = 0\nd = 0\nnested.x = 0\nnested.y = 0\n")
    (tmp_path / "one.ccv").write_text("b = 1\nc = 1\nd = 1\nnested.x = 1\n")
    (tmp_path / "two.ccv").write_text("c = 2\nd = 2\n")
    (source,) = load_sources([tmp_path / "app.cca"], values=[tmp_path / "one.ccv", tmp_path / "two.ccv"],
                             sets={"d": "3"}, set_from_env={"nested.y": "CCA_TEST_Y"},
                             environ={"CCA_TEST_Y": "env"})
    assert source.text == "# 0 1 2 3 1 env\n"


def test_undefined_value_names_file_line_and_key():
    with pytest.raises(DslError) as err:
        render("service a {\n  image {{ imagee }}\n}\n", "a.cca", {"image": "x"})
    (d,) = err.value.diagnostics
    assert (d.file, d.line, d.column, d.code) == ("a.cca", 2, 12, "undefined-value")
    assert 'undefined value "imagee"' in d.message


def test_default_filter():
    assert render('{{ x | default("y") }}', "a.cca", {}) == "y"


@pytest.mark.parametrize("expr", ["''.__class__.__mro__", "cycler.__init__.__globals__", "x.__dict__"])
def test_sandbox_blocks_python_internals(expr):
    with pytest.raises(DslError) as err:
        render("{{ " + expr + " }}", "a.cca", {"x": {}})
    assert err.value.diagnostics[0].code in ("template", "undefined-value")


def test_template_syntax_error_has_a_line():
    with pytest.raises(DslError) as err:
        render("a\n{{ x. }}\n", "a.cca", {})
    assert err.value.diagnostics[0].line == 2


def test_missing_env_variable():
    with pytest.raises(DslError) as err:
        load_sources([], set_from_env={"k": "NOPE_NOT_SET"}, environ={})
    assert "NOPE_NOT_SET" in str(err.value)


def test_plain_sources_are_not_rendered(tmp_path):
    (tmp_path / "a.cca").write_text("service a { image x }  # {# not jinja\n")
    (source,) = load_sources([tmp_path / "a.cca"])
    assert source.text.endswith("{# not jinja\n")


def test_directories_are_read_recursively_skipping_hidden(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    for rel in ("b.cca", "sub/a.cca", ".git/x.cca", "notes.txt"):
        (tmp_path / rel).write_text("secret s\n")
    names = [s.name for s in load_sources([tmp_path])]
    assert names == [str(tmp_path / "b.cca"), str(tmp_path / "sub" / "a.cca")]
