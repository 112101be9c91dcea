"""Choosing the manifest for this machine from an image index / manifest list (linux/<this arch>)."""

from __future__ import annotations

import platform
from typing import Any

from ccattler.agent.images.store import ImageError

_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm"}


def host_platform() -> tuple[str, str]:
    """("linux", GOARCH-style architecture) of this machine."""
    machine = platform.machine().lower()
    return "linux", _ARCH.get(machine, machine)


def choose_manifest(index: dict[str, Any], what: str, want: tuple[str, str] | None = None) -> dict[str, Any]:
    """The descriptor in `index` for `want` (default: this machine); an error lists what exists."""
    os_name, arch = want or host_platform()
    offered = []
    for descriptor in index.get("manifests", []):
        plat = descriptor.get("platform") or {}
        offered.append(f"{plat.get('os')}/{plat.get('architecture')}")
        if plat.get("os") == os_name and plat.get("architecture") == arch:
            return descriptor
    raise ImageError(f"{what} has no {os_name}/{arch} image (it offers {', '.join(offered) or 'none'})")
