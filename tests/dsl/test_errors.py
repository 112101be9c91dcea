"""One test per error class: the code, the position (line:col) and the key words of the message."""

import pytest

from ccattler.dsl import DslError, Source, compile_sources
from ccattler.dsl.parser import parse_with_diagnostics
from ccattler.dsl.recovery import MAX_SOURCE_BYTES

R = "resources { cpu 1  memory 1Gi }"


def case(id, text, code, line, column, *words, severity="error"):
    return pytest.param(text, code, line, column, words, severity, id=id)


CASES = [
    case("unknown-field", "service web {\n    image x\n    instnaces 3\n}", "unknown-field", 3, 5,
         'unknown field "instnaces" in service "web"', 'did you mean "instances"'),
    case("unknown-nested-field", f"service web {{ image x  {R}\n  health {{ htp / }} }}", "unknown-field",
         2, 12, 'unknown field "htp"', "health", 'did you mean "http"'),
    case("field-in-the-wrong-block", "node n1 { zone a  cpu 8 }", "unknown-field", 1, 19,
         'unknown field "cpu" in node "n1"', '"cpu" goes inside capacity'),
    case("colon-after-keyword", "service w { image x  resources { cpu: 1 } }", "syntax", 1, 34,
         'unexpected "cpu:"', "drop the colon"),
    case("unsupported-field", "tenant pay {\n    weight 3\n}", "unsupported-field", 2, 5,
         'tenant "pay": weight is not supported yet', "quota"),
    case("quoted-name", 'service "w" { image x }', "syntax", 1, 9, "write it without quotes: w"),
    case("unknown-block", "servce web { image x }", "unknown-field", 1, 1, 'unknown block "servce"',
         'did you mean "service"'),
    case("unexpected-token", "network { allow a b }", "syntax", 1, 19, 'unexpected "b"', "network",
         "expected ->"),
    case("missing-brace", "service web {\n  image x\n", "syntax", 3, 1, "end of file", '"}" is missing'),
    case("unterminated-string", 'service web { image "nginx }', "unterminated-string", 1, 21,
         "unterminated string"),
    case("unterminated-text", 'service web { command """\n  x\n }', "unterminated-string", 1, 23,
         'without a closing """'),
    case("binary", "service web\x00\x01", "binary", 1, 12, "control character", "binary"),
    case("missing-image", f"service web {{ instances 2  {R} }}", "missing-image", 1, 9,
         'service "web" has no image'),
    case("duplicate-name", f"service web {{ image x  {R} }}\nservice web {{ image y  {R} }}",
         "duplicate-name", 2, 9, 'service "default/web" is declared twice', "t.cca:1"),
    case("duplicate-field", f"service web {{ image x  image y  {R} }}", "duplicate-field", 1, 24,
         "image is given twice"),
    case("port-range", f"service web {{ image x  expose 70000  {R} }}", "port-range", 1, 31,
         "port 70000", "1–65535"),
    case("port-zero", f"service web {{ image x  {R}  health {{ tcp  port 0 }} }}", "port-range", 1, 76,
         "port 0"),
    case("negative-count", f"service web {{ image x  instances -2  {R} }}", "negative", 1, 34,
         "instances must not be negative"),
    case("not-a-number", f"service web {{ image x  instances three  {R} }}", "bad-count", 1, 34,
         "instances must be a whole number"),
    case("min-greater-than-max", f"service w {{ image x  {R}\n scale {{ horizontal {{ min 5  max 2 }} }} }}",
         "min-max", 2, 27, "min 5 is greater than max 2"),
    case("bad-cpu", "service w { image x  resources { cpu 5x  memory 1Gi } }", "bad-quantity", 1, 38,
         "unknown cpu unit", "5x"),
    case("bad-size", "service w { image x  resources { cpu 1  memory 512MB } }", "bad-quantity", 1, 48,
         "unknown size unit", "512MB"),
    case("bad-duration", f"service w {{ image x  expose 80  {R}  health {{ http /  every 10 }} }}",
         "bad-duration", 1, 89, "duration '10' needs a unit"),
    case("bad-time", f"service w {{ image x  {R}\n scale {{ horizontal {{ max 3\n"
         '  schedule { days weekdays  start "25:00"  end "18:00"  minimum 1 } } } }', "bad-time", 3, 35,
         "malformed time '25:00'", "HH:MM"),
    case("bad-day", f"service w {{ image x  {R}\n scale {{ horizontal {{ max 3\n"
         '  schedule { days mon,funday  start "08:00"  end "18:00"  minimum 1 } } } }', "bad-value", 3, 19,
         "unknown day 'funday'"),
    case("unknown-capability", "role dev { allow service.raed }", "unknown-capability", 1, 18,
         'unknown capability "service.raed"', 'did you mean "service.read"'),
    case("unknown-attribute", "policy p { allow service.read  when subject.teem == resource.team }",
         "unknown-attribute", 1, 37, 'unknown attribute "subject.teem"', 'did you mean "subject.team"'),
    case("empty-group", "group g { }", "group-body", 1, 7, 'group "g" is empty'),
    case("mixed-group", 'group g { service a  member "bob" }', "group-body", 1, 7, "mixes members"),
    case("group-instances", f"service a {{ image x  instances 2  {R} }}\n"
         f"service b {{ image y  instances 3  {R} }}\ngroup g {{ service a  service b }}",
         "group-instances", 3, 7, "same instances", "default/a has 2", "default/b has 3"),
    case("group-ports", f"service a {{ image x  expose 8080  {R} }}\n"
         f"service b {{ image y  expose 8080 http  {R} }}\ngroup g {{ service a  service b  share network }}",
         "group-ports", 3, 7, "shares its network", "default/a and default/b both listen on tcp 8080"),
    case("path-escape", f'service w {{ image x  {R}  config {{ file "/etc/x" from "../../etc/passwd" }} }}',
         "path-escape", 1, 78, "leaves the directory"),
    case("absolute-from", f'service w {{ image x  {R}  config {{ file "/etc/x" from "/etc/passwd" }} }}',
         "path-escape", 1, 78, "leaves the directory"),
    case("relative-config-path", f'service w {{ image x  {R}  config {{ file "etc/x" "y" }} }}', "bad-path",
         1, 69, "must be absolute"),
    case("bad-probe", f"service w {{ image x  {R}  readiness {{ every 5s }} }}", "bad-probe", 1, 55,
         "readiness needs exactly one of http, tcp or exec"),
    case("probe-without-port", f"service w {{ image x  {R}  liveness {{ tcp }} }}", "bad-probe", 1, 55,
         "needs a port"),
    case("bad-disruption",
         f"service w {{ image x  {R}  disruption {{ min_available 1  max_unavailable 1 }} }}",
         "bad-disruption", 1, 55, "exactly one of min_available or max_unavailable"),
    case("bad-name", f"service a/b/c {{ image x  {R} }}", "bad-name", 1, 9, "more than one '/'"),
    case("cluster-name-with-tenant", "node a/b { zone x }", "bad-name", 1, 6, "cluster-wide"),
    case("bad-bool", "volume v { persistent yes }", "bad-value", 1, 23, "expected true or false"),
    case("bad-enum",
         f'service w {{ image x  {R} }}\ngate g {{ target w port 80  sticky {{ same_site lazy }} }}',
         "bad-value", 2, 47, "same_site must be one of lax, strict, none", "lazy"),
    case("list-operand", "policy p { allow service.read  when subject.team in team-a }", "bad-value", 1, 53,
         "in needs a list"),
    case("missing-field", "connection c { port 5432 }", "missing-field", 1, 12, "needs driver"),
    case("role-without-allow", "role r { scope payments }", "missing-field", 1, 6, "at least one allow"),
    case("undeclared", f"service w {{ image x  {R}  secret db.password }}", "undeclared", 1, 62,
         'secret "default/db.password" is not declared', severity="warning"),
    case("latest-tag", f"service w {{ image nginx:latest  {R} }}", "latest-tag", 1, 19, '"latest" tag',
         severity="warning"),
    case("no-resources", "service w { image x }", "no-resources", 1, 9, "declares no resources",
         severity="warning"),
    case("duplicate-rule", f"service a {{ image x  {R} }}\nnetwork {{ allow a -> a\n allow a -> a }}",
         "duplicate-rule", 3, 2, "given twice", severity="warning"),
]


@pytest.mark.parametrize("text, code, line, column, words, severity", CASES)
def test_error_class(compiled, text, code, line, column, words, severity):
    _facts, diagnostics = compiled(text)
    found = [d for d in diagnostics if d.code == code]
    assert found, f"no {code} in {[d.render() for d in diagnostics]}"
    d = found[0]
    assert (d.line, d.column, d.severity) == (line, column, severity), d.render()
    for word in words:
        assert word in d.render(), d.render()
    assert d.file == "t.cca"


def test_every_error_of_a_file_is_reported():
    text = (
        "service a {\n    image x\n    instnaces 3\n}\n"
        "service b { image y  expose 0  resources { cpu 1  memory 1Gi } }\n"
        "servce c { }\n"
        "role r { allow service.raed }\n"
    )
    with pytest.raises(DslError) as err:
        compile_sources([Source("t.cca", text, None)])
    codes = [(d.line, d.code) for d in err.value.diagnostics]
    assert codes == [(3, "unknown-field"), (5, "port-range"), (6, "unknown-field"), (7, "unknown-capability")]
    assert "4 errors" in str(err.value)


def test_errors_of_every_file_are_reported():
    with pytest.raises(DslError) as err:
        compile_sources([Source("a.cca", "service a { }", None), Source("b.cca", "role r { }", None)])
    assert [d.file for d in err.value.diagnostics] == ["a.cca", "b.cca"]


def test_caret_line_shows_the_source(compiled):
    _facts, diagnostics = compiled("service web {\n    image x\n    instnaces 3\n}")
    rendered = diagnostics[0].render().splitlines()
    assert rendered[0].startswith("t.cca:3:5: error:")
    assert rendered[1] == "        instnaces 3"
    assert rendered[2] == "        ^^^^^^^^^"


def test_huge_source_is_refused_before_parsing():
    _file, diagnostics = parse_with_diagnostics("#" * (MAX_SOURCE_BYTES + 1), "big.cca")
    assert [d.code for d in diagnostics] == ["too-large"]
    assert "limit is 4 MiB" in diagnostics[0].message


def test_many_errors_stop_at_a_limit():
    text = "".join(f"service s{i} {{ imag x }}\n" for i in range(100))
    _file, diagnostics = parse_with_diagnostics(text, "t.cca")
    assert len(diagnostics) == 21
    assert diagnostics[-1].code == "too-many-errors"


def test_deep_nesting_is_a_syntax_error():
    _file, diagnostics = parse_with_diagnostics("service a " + "{" * 10000, "t.cca")
    assert diagnostics and diagnostics[0].code == "syntax"


def test_very_long_lines_are_shown_around_the_column():
    text = "service x { image " + "a" * 100_000 + " instnaces 3 }"
    _file, diagnostics = parse_with_diagnostics(text, "t.cca")
    rendered = diagnostics[0].render().splitlines()
    assert len(rendered[1]) < 200 and "instnaces" in rendered[1]
    assert rendered[2].index("^") == rendered[1].index("instnaces")


def test_names_too_long_for_a_key_are_errors(compiled):
    _facts, diagnostics = compiled("service " + "x" * 2000 + " { image y }")
    assert [(d.code, d.line, d.column) for d in diagnostics if d.severity == "error"] == [("too-large", 1, 9)]


def test_the_same_rule_in_two_files_is_a_warning():
    from ccattler.dsl import compile_with_diagnostics

    rule = "network { allow a -> b }"
    sources = [Source("a.cca", rule, None), Source("b.cca", rule, None)]
    _facts, diagnostics = compile_with_diagnostics(sources)
    (dup,) = [d for d in diagnostics if d.code == "duplicate-rule"]
    assert (dup.file, dup.severity) == ("b.cca", "warning") and "also declared in a.cca" in dup.message


def test_a_block_with_a_syntax_error_still_reports_its_other_errors(compiled):
    text = "service web {\n    instnaces 3\n    resources { cpu 5x  memory 1Gi }\n}\n"
    _facts, diagnostics = compiled(text)
    # the skipped line could have been the image: no "missing image", but the bad cpu is reported
    assert [(d.line, d.code) for d in diagnostics] == [(2, "unknown-field"), (3, "bad-quantity")]
