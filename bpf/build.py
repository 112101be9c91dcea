"""Builds the BPF object against the running kernel's BTF (`python -m ccattler.bpf.build`, run by
deploy/install.sh): vmlinux.h from `bpftool btf dump file /sys/kernel/btf/vmlinux format c`, then
clang -target bpf with libbpf's headers. bcc is not used: it needs kernel headers this host lacks.
The object goes to bpf/build/ (not committed: it is specific to the kernel it was built on)."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent
BUILD_DIR = SOURCE_DIR / "build"
OBJECT = BUILD_DIR / "ccattler.bpf.o"
VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
_ARCH = {"x86_64": "x86", "aarch64": "arm64"}


class BuildError(RuntimeError):
    """The BPF object could not be built (the message says which tool or file is missing)."""


def _run(args: list[str]) -> bytes:
    if shutil.which(args[0]) is None:
        raise BuildError(f"{args[0]} not found: install Debian's clang, libbpf-dev and bpftool "
                         "(deploy/install.sh does)")
    done = subprocess.run(args, capture_output=True, timeout=300)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(args[:3])}… failed:\n{done.stderr.decode(errors='replace')[-2000:]}")
    return done.stdout


def build(out: Path = OBJECT) -> Path:
    """Build the object (again when a source is newer than it) and return its path."""
    sources = [SOURCE_DIR / "ccattler.bpf.c", SOURCE_DIR / "maps.h"]
    if out.exists() and all(out.stat().st_mtime >= s.stat().st_mtime for s in sources):
        return out
    if not VMLINUX_BTF.exists():
        raise BuildError(f"{VMLINUX_BTF} is missing: this kernel has no BTF, so no eBPF data plane")
    arch = _ARCH.get(platform.machine())
    if arch is None:
        raise BuildError(f"no BPF target for machine {platform.machine()}")
    out.parent.mkdir(parents=True, exist_ok=True)
    (out.parent / "vmlinux.h").write_bytes(_run(["bpftool", "btf", "dump", "file", str(VMLINUX_BTF),
                                                 "format", "c"]))
    _run(["clang", "-O2", "-g", "-target", "bpf", f"-D__TARGET_ARCH_{arch}", f"-I{out.parent}",
          f"-I{SOURCE_DIR}", "-c", str(sources[0]), "-o", str(out)])
    return out


def main() -> int:
    try:
        print(f"built {build()}")
    except BuildError as e:
        print(f"bpf build: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
