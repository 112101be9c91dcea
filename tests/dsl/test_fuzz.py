"""Fuzzing: random and mutated sources into parse + compile + fmt; only `DslError` may escape.

Bounded to a few seconds and derandomized, so the suite's result does not depend on luck; to
explore, run e.g. `CCA_FUZZ_EXAMPLES=20000 CCA_FUZZ_RANDOM=1 pytest tests/dsl/test_fuzz.py`.
"""

import os
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccattler.dsl import DslError, Source, compile_sources, compile_with_diagnostics
from ccattler.dsl.fmt import format_source

HERE = Path(__file__).parent
CORPUS = [p.read_text() for p in sorted((HERE.parents[1] / "examples").glob("*.cca"))
          + sorted((HERE / "golden").glob("*.cca")) + sorted((HERE / "snippets").glob("*.cca"))]
TOKENS = ["{", "}", "{{", "}}", "{%", '"', '"""', "=", "==", "->", ";", ",", "[", "]", "#", "//", "\n",
          " ", "\x00", "\t", "é", "\u202e", "service", "image", "x", "from", "-1", "0", "99999999999",
          "5m", "1.5", "/", "*", "payments/*", "a/b/c", "..", "../..", "\\", "%", "node", "group",
          "health", "http", "tcp", "port", "allow", "deny", "when", "in", "[a,b]", "zone", "spread"]
EXAMPLES = int(os.environ.get("CCA_FUZZ_EXAMPLES", "100"))
FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck),
                derandomize=not os.environ.get("CCA_FUZZ_RANDOM"))


def _check(text: str) -> None:
    source = Source("fuzz.cca", text, HERE / "golden")
    try:
        facts = compile_sources([source])
    except DslError as exc:
        assert exc.diagnostics
        for d in exc.diagnostics:
            assert d.render()
        return
    # What compiles also formats, idempotently, to the same facts.
    once = format_source(text, "fuzz.cca")
    assert format_source(once, "fuzz.cca") == once
    assert compile_sources([Source("fuzz.cca", once, HERE / "golden")]) == facts


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "duplicate", "random"]))
        if action == "insert":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        elif action == "duplicate":
            text = text[:at] + text[at : at + draw(st.integers(1, 80))] + text[at:]
        else:
            text = text[:at] + draw(st.text(max_size=8)) + text[at:]
    return text


@settings(FUZZ, max_examples=EXAMPLES)
@given(mutated())
def test_mutated_sources(text):
    _check(text)


VALUES = ["-1", "0", "1.5", "abc", "5m", "1e9", "99999999999", "*", "a/b/c", "/", "x:latest", "a/*",
          "true", "60%", "1Ti", "0.0001", "25:61", "weekdays", "source_ip", "..", "-", "é", "x" * 300,
          "9" * 40, "9" * 5000, "1." + "0" * 30 + "1", "9999999Pi", "00", "08:00", "mon,sun"]
WORD = re.compile(r'(?<=[ \t])[^\s{}\[\]=;,"#<>!]+(?=[ \t\n}])')


@st.composite
def value_mutated(draw):
    """A corpus file with some values swapped for odd ones: the structure parses, the values
    stress the compiler's readers."""
    text = draw(st.sampled_from(CORPUS))
    spots = [m.span() for m in WORD.finditer(text)]
    for _ in range(draw(st.integers(1, 5))):
        start, end = draw(st.sampled_from(spots))
        text = text[:start] + draw(st.sampled_from(VALUES)) + text[end:]
        spots = [m.span() for m in WORD.finditer(text)]
    return text


@settings(FUZZ, max_examples=EXAMPLES)
@given(value_mutated())
def test_value_mutated_sources(text):
    _check(text)


@settings(FUZZ, max_examples=EXAMPLES // 2)
@given(st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join))
def test_token_soup(text):
    _check(text)


@settings(FUZZ, max_examples=EXAMPLES // 3)
@given(st.text(max_size=200))
def test_random_text(text):
    _check(text)


def test_diagnostics_never_raise_for_the_corpus():
    for text in CORPUS:
        compile_with_diagnostics([Source("c.cca", text, HERE / "golden")])


@st.composite
def commented(draw):
    """A corpus file with numbered comments added at line ends and on lines of their own."""
    lines = draw(st.sampled_from(CORPUS)).split("\n")
    inside_text = False
    out = []
    for number, line in enumerate(lines):
        if line.count('"""') % 2:
            inside_text = not inside_text
        style = draw(st.sampled_from(["", "", "end", "own"]))
        if style == "own" and not inside_text:
            out.append(f"# c{number}")
        if style == "end" and not inside_text and '"""' not in line and "#" not in line and "//" not in line:
            line += f"  // c{number}"
        out.append(line)
    return "\n".join(out)


@settings(FUZZ, max_examples=EXAMPLES // 2)
@given(commented())
def test_fmt_keeps_every_comment(text):
    once = format_source(text, "fuzz.cca")
    markers = re.findall(r"[#/] c\d+(?!\d)", text)
    assert sorted(re.findall(r"[#/] c\d+(?!\d)", once)) == sorted(markers)
    assert format_source(once, "fuzz.cca") == once
    def reader(_source, relpath):
        return f"contents of {relpath}"

    assert compile_sources([Source("f.cca", once, None)], reader=reader) == \
        compile_sources([Source("f.cca", text, None)], reader=reader)
