"""Regenerates the committed gRPC code in engine/api/gen from engine/api/proto (run after editing a
.proto: `.venv/bin/python -m ccattler.engine.api.regen`); tests check the committed code is current."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

API_DIR = Path(__file__).resolve().parent
PROTO_DIR = API_DIR / "proto"
GEN_DIR = API_DIR / "gen"
GEN_PACKAGE = "ccattler.engine.api.gen"
#: The grpcio the generated stubs require at import (their GRPC_GENERATED_VERSION): pyproject's
#: floor, not whichever grpcio-tools patch release generated them — else every new release of it
#: changes the committed code (and raises the floor) with no change to the protos.
GRPC_FLOOR = "1.85.1"


def generate(out: Path) -> list[Path]:
    """Run protoc into `out`, rewriting imports to live under `ccattler.engine.api.gen`."""
    from grpc_tools import protoc

    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    args = ["protoc", f"-I{PROTO_DIR}", f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}"]
    if protoc.main(args + protos) != 0:
        raise SystemExit("protoc failed")
    written = []
    for path in sorted(out.rglob("*.py*")):
        text = path.read_text()
        text = re.sub(r"^from ccattler\.v1 import", f"from {GEN_PACKAGE}.ccattler.v1 import", text,
                      flags=re.M)
        text = re.sub(r"^GRPC_GENERATED_VERSION = '[^']*'$", f"GRPC_GENERATED_VERSION = '{GRPC_FLOOR}'", text,
                      flags=re.M)
        path.write_text(text)
        written.append(path)
    folders = {out} | {parent for p in written for parent in p.parents if out in parent.parents}
    for folder in folders:
        init = folder / "__init__.py"
        if not init.exists():
            init.write_text("")
            written.append(init)
    return written


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(Path(tmp))
        for path in files:
            target = GEN_DIR / path.relative_to(tmp)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
            print(f"wrote {target}")


if __name__ == "__main__":
    sys.exit(main())
