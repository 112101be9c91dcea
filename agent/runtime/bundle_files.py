"""Files a runc container gets besides its image: `/etc/hostname`, `/etc/hosts` and
`/etc/resolv.conf` (the spec's — the node-local resolver — else the host's) written into the
overlay's upper layer (the container may change them), and the service's config files, written
under `<bundle>/config/<path>` — outside the rootfs — and bind-mounted read-only each at its path
(runc creates the mount point).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccattler.agent.runtime.base import ContainerError, ContainerSpec


def host_resolv_conf() -> str | None:
    """The host's resolv.conf for containers, unless it points at a loopback resolver (which a
    container's own network namespace cannot reach, e.g. systemd-resolved's 127.0.0.53)."""
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return None
    servers = [line.split()[1] for line in lines if line.startswith("nameserver") and len(line.split()) > 1]
    if not servers or any(s.startswith("127.") or s == "::1" for s in servers):
        return None
    return "\n".join(lines) + "\n"


def _parts(name: str, path: str) -> list[str]:
    """`path` split for joining under a directory; absolute and without '..', or a clear error."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not path.startswith("/") or ".." in parts or not parts:
        raise ContainerError(f"{name}: config file path {path!r} must be absolute, without '..'")
    return parts


def write_etc_files(upper: Path, spec: ContainerSpec) -> None:
    """hostname, hosts and resolv.conf into the overlay's upper layer."""
    files = {"/etc/hostname": spec.hostname + "\n"}
    files["/etc/hosts"] = "127.0.0.1\tlocalhost\n" + (f"{spec.ip}\t{spec.hostname}\n" if spec.ip else "")
    if resolv := spec.resolv_conf or host_resolv_conf():
        files["/etc/resolv.conf"] = resolv
    for path, content in files.items():
        target = upper.joinpath(*_parts(spec.name, path))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


def config_mounts(bundle: Path, spec: ContainerSpec) -> list[dict[str, Any]]:
    """Write the spec's config files under `<bundle>/config`; the read-only OCI mounts of them."""
    mounts = []
    for file in spec.files:
        source = bundle.joinpath("config", *_parts(spec.name, file.path))
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(file.content)
        source.chmod(0o644)
        mounts.append({"destination": file.path, "type": "bind", "source": str(source),
                       "options": ["bind", "ro", "nosuid", "nodev"]})
    return mounts
