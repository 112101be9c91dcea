"""`format_source`: canonical, idempotent, comment-preserving, and meaning-preserving."""

from pathlib import Path

import pytest

from ccattler.dsl import Source, compile_sources
from ccattler.dsl.fmt import format_source

HERE = Path(__file__).parent
EXAMPLES = sorted((HERE.parents[1] / "examples").glob("*.cca"))
GOLDEN = sorted((HERE / "golden").glob("*.cca"))
SNIPPETS = sorted((HERE / "snippets").glob("*.cca"))
ALL = EXAMPLES + GOLDEN + SNIPPETS


def _facts(text: str, path: Path) -> dict:
    return compile_sources([Source("x.cca", text, path.parent)])


@pytest.mark.parametrize("path", ALL, ids=[f"{p.parent.name}/{p.name}" for p in ALL])
def test_fmt_is_idempotent_and_keeps_meaning(path: Path):
    text = path.read_text()
    once = format_source(text, path.name)
    assert format_source(once, path.name) == once
    assert _facts(once, path) == _facts(text, path)
    assert once.count("#") + once.count("//") >= text.count("\n#")


def test_canonical_layout():
    text = ('service web { image = "nginx"; instances = 3  resources { cpu 1  memory 1Gi }\n'
            '  env { A "x"  B = y } placement { prefer a = b weight 5 zone spread } }\n'
            "node n { label zone = a }")
    assert format_source(text) == (
        "service web {\n"
        '    image "nginx"\n'
        "    instances 3\n"
        "    resources {\n"
        "        cpu 1\n"
        "        memory 1Gi\n"
        "    }\n"
        "    env {\n"
        '        A = "x"\n'
        "        B = y\n"
        "    }\n"
        "    placement {\n"
        "        prefer a = b weight 5\n"
        "        zone spread\n"
        "    }\n"
        "}\n"
        "\n"
        "node n {\n"
        "    label zone = a\n"
        "}\n"
    )


def test_comments_stay_where_they_were():
    text = ("# head\n"
            "service x { # after brace\n"
            "   image nginx  # trailing\n"
            "\n\n\n"
            "   // own line\n"
            "   instances 3 }  # after block\n"
            "# tail\n")
    assert format_source(text) == (
        "# head\n"
        "service x {  # after brace\n"
        "    image nginx  # trailing\n"
        "\n"
        "    // own line\n"
        "    instances 3\n"
        "}  # after block\n"
        "# tail\n"
    )


def test_text_blocks_are_reindented():
    text = 'service x { config { file "/a" """\n  one\n    two\n  """\n file "/b" """x""" } }'
    out = format_source(text)
    assert '        file "/a" """\n            one\n              two\n        """\n' in out
    assert 'file "/b" """\n            x"""' in out
    assert format_source(out) == out


def test_empty_and_comment_only_sources():
    assert format_source("") == ""
    assert format_source("# only\n\n\n// comments\n") == "# only\n\n// comments\n"
