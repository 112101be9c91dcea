"""The layering rule of ARCHITECTURE.md: `dsl` imports nothing of ours but `engine.facts`."""

import ast
from pathlib import Path

DSL = Path(__file__).parents[2] / "dsl"
ALLOWED = ("ccattler.dsl", "ccattler.engine.facts")


def test_dsl_imports_only_engine_facts():
    offenders = []
    for path in sorted(DSL.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.startswith("ccattler.") and not name.startswith(ALLOWED):
                    offenders.append(f"{path.relative_to(DSL.parent)}: {name}")
    assert offenders == []
