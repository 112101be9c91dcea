"""Every "never" of ARCHITECTURE.md's layout, checked by walking the AST of each module's imports
(the dsl rule has its own test in tests/dsl/test_layering.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def imports(path: Path) -> list[str]:
    """Every module `path` imports (absolute names; relative imports are not used here)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def offenders(files: list[Path], forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    return [f"{path.relative_to(ROOT)}: {name}" for path in files for name in imports(path)
            if name.startswith(forbidden) and not name.startswith(allowed)]


def modules(*folders: str) -> list[Path]:
    found = sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))
    assert found, folders
    return found


#: Modules that are controllers: pure functions of the snapshot (no I/O).
CONTROLLERS = [p for p in modules("engine/controllers") if p.name != "__init__.py"] + [
    ROOT / "engine/placement/controller.py"]
#: What a module doing I/O imports (the store, the network, processes, files, the agent).
IO = ("ccattler.engine.store", "ccattler.engine.api", "ccattler.engine.runner", "ccattler.agent",
      "ccattler.cli", "subprocess", "shutil", "sqlite3", "grpc", "urllib", "http",
      "requests", "etcd3")


@pytest.mark.parametrize(("what", "files", "forbidden", "allowed"), [
    ("engine never imports cli", modules("engine"), ("ccattler.cli",), ()),
    ("agent never imports cli", modules("agent"), ("ccattler.cli",), ()),
    ("engine/facts is a leaf", modules("engine/facts"), ("ccattler.",), ("ccattler.engine.facts",)),
    ("the clingo bridge knows no controller", modules("engine/solve"), ("ccattler.",),
     ("ccattler.engine.solve", "ccattler.engine.facts", "ccattler.rules")),
    ("the agent never opens the store", modules("agent"), ("ccattler.engine.store",), ()),
    ("controllers do no I/O", CONTROLLERS, IO, ()),
])
def test_layout_never(what, files, forbidden, allowed):
    assert offenders(files, forbidden, allowed) == [], what


#: Calls that do I/O (`socket` itself is imported for inet_aton/inet_ntoa, pure conversions).
IO_CALLS = {"open", "socket.socket", "socket.create_connection", "os.open", "os.system"}


def _called(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return ""


def test_controllers_open_no_files_or_sockets():
    calls = [f"{p.relative_to(ROOT)}:{n.lineno}" for p in CONTROLLERS
             for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.Call) and _called(n.func) in IO_CALLS]
    assert calls == []


#: Key prefixes are named once, in engine/facts/keys.py; the modules allowed a literal one, and why.
PREFIX_LITERAL_ALLOWED = {
    "engine/admission/probe.py": "sample documents the policy probe grounds a policy against",
}
_PREFIX_ROOTS = ("desired/", "derived/", "observed/", "intent/", "leader/", "audit/", "secret/", "auth/")


def test_key_prefixes_are_named_once():
    found = []
    for path in modules("engine", "agent", "cli", "dsl"):
        rel = str(path.relative_to(ROOT))
        if rel == "engine/facts/keys.py" or rel in PREFIX_LITERAL_ALLOWED or "/gen/" in rel:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and node.value.startswith(_PREFIX_ROOTS) and " " not in node.value):
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "name these prefixes in engine/facts/keys.py:\n" + "\n".join(found)
