"""The committed gRPC code in engine/api/gen is what engine/api/regen.py makes from the protos."""

import re
from pathlib import Path

from ccattler.engine.api import regen


def test_generated_code_is_current(tmp_path: Path):
    fresh = {p.relative_to(tmp_path): p.read_text() for p in regen.generate(tmp_path)}
    committed = {p.relative_to(regen.GEN_DIR): p.read_text() for p in regen.GEN_DIR.rglob("*.py*")
                 if "__pycache__" not in p.parts}
    stale = sorted(str(p) for p in fresh.keys() | committed.keys() if fresh.get(p) != committed.get(p))
    assert not stale, f"regenerate with `python -m ccattler.engine.api.regen`: {stale}"


def test_the_stubs_require_the_grpcio_pyproject_requires():
    pyproject = (Path(regen.API_DIR).parents[1] / "pyproject.toml").read_text()
    assert re.search(r'"grpcio>=([\d.]+)"', pyproject).group(1) == regen.GRPC_FLOOR
