"""Each .lp program's declared inputs (`#defined name/arity`) match what Python emits: every
declared input has an emitter, every emitted fact is declared (read statically from the emitting
calls: `atom("name", …)` in engine/placement and engine/netpolicy, `facts.add("name", …)` in
engine/admission). Every declared input is documented by a `%!` line of the contract and every
`%!` head is declared; the `#show` outputs are the ones the contract and rules/README.md list."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from clingo import SymbolType
from clingo import ast as lp_ast
from clingo.ast import parse_string

from ccattler.engine.admission.vocabulary import VOCABULARY

ROOT = Path(__file__).parents[2]


def declared(program: str) -> set[tuple[str, int]]:
    text = (ROOT / "rules" / f"{program}.lp").read_text()
    return {(name, int(arity)) for name, arity in re.findall(r"^#defined (\w+)/(\d+)\.", text, re.M)}


def documented(program: str) -> set[tuple[str, int]]:
    """(name, arity) of the heads of the `%!` blocks (`%! name(A, B), other(C): what it means`)."""
    found, previous = set(), ""
    for line in (ROOT / "rules" / f"{program}.lp").read_text().splitlines():
        if line.startswith("%!") and not previous.startswith("%!"):
            head = line[2:].split("):", 1)[0] + ")"
            found |= {(name, len(args.split(","))) for name, args in re.findall(r"(\w+)\(([^()]*)\)", head)}
        previous = line
    return found


def from_extensions(program: str) -> set[tuple[str, int]]:
    """Declared inputs that operator extensions derive (their `%!` line says so), not Python."""
    text = (ROOT / "rules" / f"{program}.lp").read_text()
    pattern = r"^%! (\w+)\(.*operator extension.*\n#defined \1/(\d+)\."
    return {(n, int(a)) for n, a in re.findall(pattern, text, re.M)}


def terms(program: str) -> set[tuple[str, int]]:
    """Function terms the program reads inside its atoms (`svc(T, I)`, `all`, `allow`) and the
    constants its contract names (`tcp | udp`): what Python builds as arguments, not facts."""
    found: set[tuple[str, int]] = set()

    def walk(node, inside: bool) -> None:
        if isinstance(node, lp_ast.AST):
            if node.ast_type == lp_ast.ASTType.Function:
                if inside:
                    found.add((node.name, len(node.arguments)))
                for arg in node.arguments:
                    walk(arg, True)
                return
            if node.ast_type == lp_ast.ASTType.SymbolicTerm:  # a constant such as `all`
                if inside and node.symbol.type == SymbolType.Function:
                    found.add((node.symbol.name, len(node.symbol.arguments)))
                return
            for key in node.child_keys:
                walk(getattr(node, key), inside)
        elif not isinstance(node, str | int | type(None)):
            for item in node:
                walk(item, inside)

    text = (ROOT / "rules" / f"{program}.lp").read_text()
    parse_string(text, lambda statement: walk(statement, False))
    contract = " ".join(line for line in text.splitlines() if line.startswith("%!"))
    return found | {(word, 0) for word in re.findall(r"\b[a-z]\w*\b", contract)}


def shown(program: str) -> set[tuple[str, int]]:
    text = (ROOT / "rules" / f"{program}.lp").read_text()
    plain = {(name, int(arity)) for name, arity in re.findall(r"^#show (\w+)/(\d+)\.", text, re.M)}
    return plain | {(name, args.count(",") + 1) for name, args in
                    re.findall(r"^#show (\w+)\(([^()]*)\) *:", text, re.M)}  # `#show cost(S, …) : …`


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


PROGRAMS = ("placement", "admission", "netpolicy")


@pytest.mark.parametrize(("program", "folder", "call"), [
    ("placement", "engine/placement", "atom"),
    ("admission", "engine/admission", "add"),
    ("netpolicy", "engine/netpolicy", "atom"),
])
def test_declared_inputs_match_what_python_emits(program, folder, call):
    inputs, facts = declared(program), emitted(folder, call)
    assert inputs and facts
    vocabulary = set(VOCABULARY) if program == "admission" else inputs  # policies read more
    facts -= terms(program) - inputs  # arguments (selectors, constants), not facts
    assert sorted(f for f in facts if not matches(f, vocabulary)) == [], "emitted but not declared"
    never = sorted(i for i in inputs - from_extensions(program) if not any(matches(f, {i}) for f in facts))
    assert never == [], "declared, never emitted"
    if program == "admission":
        assert inputs <= vocabulary, "admission.lp reads a predicate outside the vocabulary"


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_declared_input_is_documented(program):
    inputs, docs = declared(program), documented(program)
    assert sorted(inputs - docs) == [], "#defined without a %! line"
    assert sorted(docs - inputs) == [], "%! line without a #defined"


def test_netpolicy_extension_inputs_are_the_ones_the_banner_names():
    text = " ".join(line.lstrip("% ") for line in (ROOT / "rules" / "netpolicy.lp").read_text().splitlines())
    assert from_extensions("netpolicy") == {("policy_deny", 3), ("policy_names", 2)}
    assert "derive `policy_deny/3` and `policy_names/2`" in text
    assert "but `policy_deny/3` and `policy_names/2` (derived by extensions)" in text


@pytest.mark.parametrize("program", PROGRAMS)
def test_outputs_are_the_ones_the_contract_and_readme_list(program):
    text = (ROOT / "rules" / f"{program}.lp").read_text()
    outputs = shown(program)
    assert outputs
    contract = text.split("contract: output" if "contract: output" in text else "% Outputs", 1)[1]
    contract = contract.split("% ====", 1)[0] if "contract: output" in text else contract.split("\n\n", 1)[0]
    heads = {(name, args.count(",") + 1 if args else 0) for name, args in
             re.findall(r"^%\s+(\w+)\(((?:[^()]|\([^()]*\))*)\)", contract, re.M)}
    for name, arity in outputs:
        assert any(n == name for n, _ in heads), f"{name}/{arity} is shown but not in the output contract"
    row = next(line for line in (ROOT / "rules" / "README.md").read_text().splitlines()
               if line.startswith(f"| `{program}.lp` |"))
    listed = {(n, int(a)) for n, a in re.findall(r"`(\w+)/(\d+)`", row.split("|")[-2].split(";", 1)[0])}
    if program == "placement":  # its row says "see below": the section's "Read back by Python" table
        section = (ROOT / "rules" / "README.md").read_text().split("**Read back by Python**", 1)[1]
        table = section.split("\n\n", 2)[1]
        listed = {(n, args.count(",") + 1) for n, args in re.findall(r"^\| `(\w+)\(([^()]*)\)`", table, re.M)}
        outputs = outputs | {("class_ok", 2)}  # read from the grounded base part, not shown
    assert listed == outputs, row
