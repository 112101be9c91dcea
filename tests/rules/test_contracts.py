"""Each .lp program's declared inputs (`#defined name/arity`) match what Python emits: every
declared input has an emitter, every emitted fact is declared (read statically from the emitting
calls: `atom("name", …)` in engine/placement, `facts.add("name", …)` in engine/admission)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ccattler.engine.admission.vocabulary import VOCABULARY

ROOT = Path(__file__).parents[2]


def declared(program: str) -> set[tuple[str, int]]:
    text = (ROOT / "rules" / f"{program}.lp").read_text()
    return {(name, int(arity)) for name, arity in re.findall(r"^#defined (\w+)/(\d+)\.", text, re.M)}


def emitted(folder: str, call: str) -> set[tuple[str, int | None]]:
    """(name, arity) of every fact built by `call("name", args…)` in `folder` (arity None when the
    arguments are unpacked with `*`)."""
    found = set()
    for path in sorted((ROOT / folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name != call:
                continue
            rest = node.args[1:]
            arity = None if any(isinstance(a, ast.Starred) for a in rest) else len(rest)
            found.add((node.args[0].value, arity))
    return found


def matches(fact: tuple[str, int | None], signatures: set[tuple[str, int]]) -> bool:
    name, arity = fact
    return any(n == name and (arity is None or a == arity) for n, a in signatures)


@pytest.mark.parametrize(("program", "folder", "call"), [
    ("placement", "engine/placement", "atom"),
    ("admission", "engine/admission", "add"),
])
def test_declared_inputs_match_what_python_emits(program, folder, call):
    inputs, facts = declared(program), emitted(folder, call)
    assert inputs and facts
    vocabulary = set(VOCABULARY) if program == "admission" else inputs  # policies read more
    assert sorted(f for f in facts if not matches(f, vocabulary)) == [], "emitted but not declared"
    never = sorted(i for i in inputs if not any(matches(f, {i}) for f in facts))
    assert never == [], "declared, never emitted"
    if program == "admission":
        assert inputs <= vocabulary, "admission.lp reads a predicate outside the vocabulary"
