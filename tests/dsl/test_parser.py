"""The lexical rules and every snippet of LANGUAGE.md parse; the AST keeps positions."""

import re
from pathlib import Path

import pytest

from ccattler.dsl import parse
from ccattler.dsl.ast import Flag, ListValue, Scalar
from ccattler.dsl.values import parse_values

HERE = Path(__file__).parent
SHARED_LANGUAGE = HERE.parents[2] / "shared" / "LANGUAGE.md"
SNIPPETS = sorted(p for p in (HERE / "snippets").iterdir() if p.suffix in (".cca", ".ccv"))


def _check_snippet(text: str, name: str) -> None:
    if name.endswith(".ccv") or re.match(r"\s*#\s*\S+/values\.ccv", text):
        assert parse_values(text, name)
    else:
        assert parse(text, name).blocks


@pytest.mark.parametrize("path", SNIPPETS, ids=[p.name for p in SNIPPETS])
def test_copied_language_snippets_parse(path: Path):
    _check_snippet(path.read_text(), path.name)


@pytest.mark.skipif(not SHARED_LANGUAGE.exists(), reason="../shared is not beside this checkout")
def test_shared_language_snippets_parse():
    blocks = re.findall(r"```[a-z]*\n(.*?)```", SHARED_LANGUAGE.read_text(), re.S)
    assert blocks
    for i, block in enumerate(blocks):
        _check_snippet(block, f"LANGUAGE.md block {i}")


def fields(text: str):
    return parse(text).blocks[0].body


def test_one_line_block_equals_multi_line():
    one = parse("service w { resources { cpu 500m  memory 512Mi } }").blocks[0]
    many = parse("service w {\n resources {\n  cpu 500m\n  memory 512Mi\n }\n}").blocks[0]
    assert [(f.keyword, f.values[0].value) for f in one.body[0].body] == \
           [(f.keyword, f.values[0].value) for f in many.body[0].body]


def test_semicolons_and_optional_equals():
    body = fields('service w { image = "nginx"; instances = 3;; command "x" }')
    assert [(f.keyword, f.values[0].value) for f in body] == [("image", "nginx"), ("instances", "3"),
                                                               ("command", "x")]


def test_keywords_are_contextual():
    body = fields("node n { label zone = a  zone b  label restrict = capacity }")
    assert [(f.keyword, f.key.value if f.key else None, f.values[0].value) for f in body] == [
        ("label", "zone", "a"), ("zone", None, "b"), ("label", "restrict", "capacity")]
    env = fields("service w { env { port = 1  image = x  from = y } }")[0].body
    assert [e.key.value for e in env] == ["port", "image", "from"]


def test_comments_both_styles_and_positions():
    file = parse("# one\nservice w { // two\n  image x # three\n}\n")
    assert [(c.text, c.span.line, c.own_line) for c in file.comments] == [
        ("# one", 1, True), ("// two", 2, False), ("# three", 3, False)]
    image = file.blocks[0].body[0]
    assert (image.span.line, image.span.column, image.values[0].span.column) == (3, 3, 9)


def test_strings_and_text_blocks():
    body = fields('service w { command "a \\"b\\" \\\\ c\\n"  config { file "/x" """\n'
                  '      line one\n        indented\n    """ } }')
    assert body[0].values[0].value == 'a "b" \\ c\n'
    content = body[1].body[0].values[1]
    assert content.style == "text"
    assert content.value == "line one\n  indented\n"


def test_words_names_and_images():
    body = fields("service payments/api { image registry.local:5000/team/app@sha256:abc  owner a-b.c }")
    assert parse("service payments/api { }").blocks[0].name.value == "payments/api"
    assert body[0].values[0].value == "registry.local:5000/team/app@sha256:abc"


def test_network_rule_arguments():
    rule = fields("network { allow payments/* -> shared/dns port 53 udp  deny * -> a }")
    assert [type(a).__name__ for a in rule[0].args] == ["Scalar", "Flag", "Scalar", "Flag", "Scalar", "Flag"]
    assert rule[0].option("port").value == "53"
    assert rule[1].values[0].value == "*"


def test_lists_and_days():
    when = fields("policy p { when resource.tenant not_in [a, \"b\",] }")[0]
    assert isinstance(when.args[1], Flag) and when.args[1].word == "not_in"
    assert isinstance(when.args[2], ListValue) and [i.value for i in when.args[2].items] == ["a", "b"]
    days = fields("service w { scale { horizontal { schedule { days mon,tue } } } }")
    day_list = days[0].body[0].body[0].body[0].values[0]
    assert isinstance(day_list, ListValue) and not day_list.brackets


def test_from_file_value():
    f = fields('service w { config { file "/a" from "conf/a.conf" } }')[0].body[0]
    src = f.values[1]
    assert isinstance(src, Scalar) and (src.style, src.value, src.raw) == ("from", "conf/a.conf",
                                                                            'from "conf/a.conf"')
