"""Golden facts: each construct's .cca under golden/ compiles to exactly the JSON beside it.

The JSON files pin the document shapes of docs/facts.md that controllers and the agent read.
Regenerate after a deliberate change with `UPDATE_GOLDEN=1 pytest tests/dsl/test_golden.py`
and review the diff.
"""

import json
import os
from pathlib import Path

import pytest

from ccattler.dsl import compile_sources, load_sources

GOLDEN = Path(__file__).with_name("golden")
CASES = sorted(GOLDEN.glob("*.cca"))


def _render(facts: dict) -> str:
    return json.dumps(facts, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_golden_facts(case: Path):
    sources = load_sources([case])
    # Names as a relative path, so the goldens do not depend on where the checkout is.
    sources = [s.__class__(case.name, s.text, s.base_dir) for s in sources]
    got = _render(compile_sources(sources))
    expected_file = case.with_suffix(".json")
    if os.environ.get("UPDATE_GOLDEN"):
        expected_file.write_text(got)
    assert got == expected_file.read_text()


def test_every_golden_has_facts():
    assert len(CASES) >= 10
    for case in CASES:
        assert case.with_suffix(".json").exists(), f"{case.name} has no golden JSON"


def _words(node, out: set[str]) -> None:
    out.add(node.keyword)
    out.update(node.flags)
    for child in node.body or ():
        _words(child, out)


def test_every_keyword_of_the_grammar_has_a_golden():
    """No construct of the language goes untested: every keyword appears in some golden file."""
    from ccattler.dsl import parse
    from ccattler.dsl.parser import _terminal_texts

    used: set[str] = set()
    for case in CASES:
        for block in parse(case.read_text(), case.name).blocks:
            _words(block, used)
    keywords = {text for text in _terminal_texts().values() if text.replace("_", "").isalpha()}
    keywords -= {"from"}  # a value form (`from "file"`), not a field
    assert keywords - used == set()
