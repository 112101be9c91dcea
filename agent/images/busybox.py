"""Builds the `busybox` image from the host's static busybox (Debian's busybox-static), so a fresh
machine runs containers with no registry.

The layer is reproducible (fixed times and owners): the same binary always gives the same digest.
`binary` (default `/bin/busybox`) changes which busybox goes in.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

from ccattler.agent.images.store import (
    OCI_CONFIG,
    OCI_LAYER_GZIP,
    OCI_MANIFEST,
    Image,
    ImageError,
    ImageStore,
)

DEFAULT_BINARY = Path("/bin/busybox")
_DIRS = {"bin": 0o755, "sbin": 0o755, "usr": 0o755, "usr/bin": 0o755, "usr/sbin": 0o755,
         "etc": 0o755, "dev": 0o755, "proc": 0o755, "sys": 0o755, "root": 0o700,
         "tmp": 0o1777, "var": 0o755, "var/www": 0o755, "home": 0o755}
_FILES = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n",
    "etc/group": "root:x:0:\nnobody:x:65534:\n",
    "etc/hosts": "127.0.0.1\tlocalhost\n",
}


def _applets(binary: Path) -> list[str]:
    try:
        out = subprocess.run([str(binary), "--list-full"], capture_output=True, text=True, check=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ImageError(f"cannot list the applets of {binary} (is busybox-static installed?): {exc}") \
            from None
    return sorted({line.strip() for line in out.splitlines() if line.strip()} - {"bin/busybox"})


def _layer(binary: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, mode in _DIRS.items():
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        data = binary.read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
        for name, text in _FILES.items():
            raw = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(raw), 0o644
            tar.addfile(info, io.BytesIO(raw))
        for applet in _applets(binary):
            info = tarfile.TarInfo(applet)
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, "/bin/busybox", 0o777
            tar.addfile(info)
    return buf.getvalue()


def build_busybox(store: ImageStore, name: str = "busybox:latest", binary: Path = DEFAULT_BINARY) -> Image:
    """Build (or rebuild, idempotently) the busybox image into `store` under `name`."""
    if not binary.is_file():
        raise ImageError(f"{binary} not found: install Debian's busybox-static")
    tar = _layer(binary)
    compressed = gzip.compress(tar, mtime=0)
    diff_id = "sha256:" + hashlib.sha256(tar).hexdigest()
    layer_digest, layer_size = store.add_blob(compressed)
    config = {
        "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["sh"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": f"ccattler: {binary}"}],
    }
    config_digest, config_size = store.add_blob(json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": OCI_LAYER_GZIP, "digest": layer_digest, "size": layer_size}],
    }
    manifest_digest, _ = store.add_blob(json.dumps(manifest, sort_keys=True).encode())
    return store.resolve(store.tag(name, manifest_digest))
