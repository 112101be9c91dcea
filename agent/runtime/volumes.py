"""Named volumes on one node: a directory `<state>/volumes/<key>` per volume (`tenant/volume`) or per
stateful ordinal (`tenant/volume/instance`), and a record `<state>/volume-meta/<key>.json` of each
directory this node made (which is how the ones to delete are found: a shared volume's directory and
the parent of per-ordinal ones look alike).

`size` is enforced when the node can loop-mount (root, /dev/loop-control, mkfs.ext4): a new volume
gets a sparse ext4 image `<state>/volume-meta/<key>.img` of `size` bytes mounted at its directory
(writes beyond it fail with ENOSPC), re-mounted when found unmounted (after a reboot). Otherwise
— and for a directory that already held data when the size became known, which an image would
hide — the usage is measured and reported against the size. A volume is deleted only when no desired
instance on the node uses it and its declaration says `persistent false`; an unknown declaration
counts as persistent (never delete data for lack of information).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ccattler.agent.runtime.base import ContainerError, VolumeMount

log = logging.getLogger(__name__)

#: Seconds between two measurements of one volume (a directory walk can be long).
MEASURE_EVERY = 60.0
#: A measured usage is published only when it moved by at least this much (or crossed the size).
PUBLISH_STEP = 1 << 20


def loop_available() -> bool:
    """Can this process make and loop-mount ext4 images?"""
    return os.geteuid() == 0 and Path("/dev/loop-control").exists() and shutil.which("mkfs.ext4") is not None


def _run(args: list[str], what: str) -> None:
    try:
        result = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ContainerError(f"{what}: {exc}") from None
    if result.returncode != 0:
        raise ContainerError(f"{what}: {(result.stderr or result.stdout).strip()}")


def _disk_usage(path: Path) -> int:
    """Bytes allocated under `path` (like `du -s`), staying on its filesystem, not following links;
    whatever vanishes or cannot be read meanwhile is skipped."""
    try:
        device = path.stat().st_dev
    except OSError:
        return 0
    total, seen, stack = 0, set(), [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
                folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if st.st_dev != device or (st.st_nlink > 1 and not folder and st.st_ino in seen):
                continue
            seen.add(st.st_ino)
            total += st.st_blocks * 512
            if folder:
                stack.append(entry.path)
    return total


class NodeVolumes:
    """The volume directories of one node (thread-safe: containers are created in parallel)."""

    def __init__(self, state_dir: Path | str, enforce: bool | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.state = Path(state_dir)
        self.meta = self.state / "volume-meta"
        #: Sizes are enforced with loop-mounted images (None: when this node can).
        self.enforce = loop_available() if enforce is None else enforce
        self.clock = clock
        self._lock = threading.Lock()
        self._measured: dict[str, tuple[float, int]] = {}  # key → (when, bytes published)
        self._records = self._load()  # key → record, kept in memory (read every tick)
        self._over: set[str] = set()  # keys reported over their size (warned once per crossing)

    # -- making and mounting -------------------------------------------------------------------
    def prepare(self, volume: VolumeMount) -> Path:
        """The host directory of `volume`, made (with its image when the size is enforced) on first
        use and mounted again when its image is not mounted."""
        host = volume.host_dir(self.state)  # checks the key and the path
        with self._lock:
            record = self._record(volume.key)
            if record is None:
                fresh = not host.exists() or not any(host.iterdir())
                host.mkdir(mode=0o755, parents=True, exist_ok=True)
                kept = self._image(volume.key).exists()  # its record was lost: use it, never mkfs again
                image = kept or bool(volume.size and self.enforce and fresh)
                if image and not kept:
                    self._make_image(volume.key, int(volume.size or 0))
                elif volume.size and not fresh and not kept:
                    log.warning("volume %s: %s already holds data; its size is reported, not enforced",
                                volume.key, host)
                size = self._image(volume.key).stat().st_size if image else None
                record = {"key": volume.key, "size": size, "image": image, "created": time.time()}
                self._write_record(volume.key, record)
            else:
                host.mkdir(mode=0o755, parents=True, exist_ok=True)
            if record.get("image") and not os.path.ismount(host):
                self._mount(volume.key, host)
        return host

    def _make_image(self, key: str, size: int) -> None:
        image = self._image(key)
        image.parent.mkdir(parents=True, exist_ok=True)
        with open(image, "wb") as out:
            out.truncate(size)  # sparse: only what is written takes disk space
        try:  # -m 0: no blocks reserved for root (containers run as root: the size is the size)
            _run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)],
                 f"volume {key}: cannot make a {size}-byte ext4 image")
        except ContainerError:
            image.unlink(missing_ok=True)
            raise

    def _mount(self, key: str, host: Path) -> None:
        # mount -o loop sets autoclear: unmounting frees the loop device too.
        _run(["mount", "-o", "loop,nosuid,nodev", str(self._image(key)), str(host)],
             f"volume {key}: cannot loop-mount its image at {host}")

    # -- removing ------------------------------------------------------------------------------
    def collect(self, referenced: set[str], declared: Mapping[str, Any],
                idle: Callable[[], bool] = lambda: True) -> list[str]:
        """Delete the volume directories no desired instance uses (`referenced`: their keys) whose
        declaration (`declared`: `tenant/volume` → its desired/volume document) says `persistent`
        false. `idle()` must say that no container outside the desired ones is left (one still
        being removed may hold a volume); it is asked only when something would go."""
        keys = self.keys()
        doomed = [key for key in keys if key not in referenced
                  and isinstance(doc := declared.get("/".join(key.split("/")[:2])), dict)
                  and doc.get("persistent") is False
                  # a shared volume's directory may hold ordinals' own (one volume, two services)
                  and not any(other.startswith(key + "/") for other in keys)]
        if not doomed or not idle():
            return []
        gone = []
        for key in doomed:
            try:
                self.delete(key)
                gone.append(key)
            except (ContainerError, OSError) as exc:  # the next call tries again
                log.warning("deleting volume %s: %s", key, exc)
        if gone:
            log.info("deleted volumes no instance here uses (persistent false): %s", ", ".join(gone))
        return gone

    def delete(self, key: str) -> None:
        """Unmount and delete one volume: its directory, image and record."""
        host = self.state.joinpath("volumes", *key.split("/"))
        with self._lock:
            if os.path.ismount(host):
                _run(["umount", str(host)], f"volume {key}: cannot unmount {host}")
            shutil.rmtree(host, ignore_errors=True)
            self._image(key).unlink(missing_ok=True)
            self._record_path(key).unlink(missing_ok=True)
            self._records.pop(key, None)
            self._measured.pop(key, None)
            self._over.discard(key)
            parent = host.parent  # a per-ordinal directory's parent, unless it is a volume itself
            if len(key.split("/")) == 3 and self._record("/".join(key.split("/")[:2])) is None:
                try:
                    parent.rmdir()
                except OSError:
                    pass  # other ordinals (or anything else) still in it

    def unmount_all(self) -> list[str]:
        """Unmount every volume image (node shutdown, `cca down`); the data stays on disk."""
        done = []
        with self._lock:
            for key in self.keys():
                host = self.state.joinpath("volumes", *key.split("/"))
                if os.path.ismount(host):
                    try:
                        _run(["umount", str(host)], f"volume {key}: cannot unmount {host}")
                        done.append(key)
                    except ContainerError as exc:
                        log.warning("%s", exc)
        return done

    # -- reporting -----------------------------------------------------------------------------
    def report(self, volumes: Iterable[VolumeMount]) -> list[dict[str, Any]]:
        """`[{"name": key, "path", "size", "used", "enforced"}]` for an observed instance document:
        `size` the declared size (an enforced image's own size), `used` bytes (measured every
        MEASURE_EVERY s, moved on by PUBLISH_STEP at least), null before the first measurement."""
        out = []
        for volume in volumes:
            record = self._record(volume.key) or {}
            enforced = bool(record.get("image"))
            size = record.get("size") if enforced else volume.size
            used = self._used(volume.key, enforced, size)
            out.append({"name": volume.key, "path": volume.path, "size": size, "used": used,
                        "enforced": enforced})
        return out

    def _used(self, key: str, enforced: bool, size: int | None) -> int | None:
        host = self.state.joinpath("volumes", *key.split("/"))
        now = self.clock()
        last = self._measured.get(key)
        if last is not None and now - last[0] < MEASURE_EVERY:
            return last[1]
        if not host.is_dir():
            return None
        if enforced and os.path.ismount(host):
            st = os.statvfs(host)
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
        else:
            used = _disk_usage(host)
        over = size is not None and used > size
        if last is not None and abs(used - last[1]) < PUBLISH_STEP and over == (key in self._over):
            used = last[1]  # no meaningful change: the observed document stays as it is
        self._measured[key] = (now, used)
        if over and key not in self._over:
            log.warning("volume %s uses %d bytes, over its size of %d (not enforced on this node)",
                        key, used, size)
            self._over.add(key)
        elif not over:
            self._over.discard(key)
        return used

    # -- records -------------------------------------------------------------------------------
    def keys(self) -> list[str]:
        """Every volume directory this node made."""
        return sorted(self._records)

    def _load(self) -> dict[str, dict[str, Any]]:
        if not self.meta.is_dir():
            return {}
        records = {}
        for path in self.meta.rglob("*.json"):
            try:
                records[str(path.relative_to(self.meta)).removesuffix(".json")] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # a torn record: the directory is treated as not made here (never deleted)
        return records

    def _record_path(self, key: str) -> Path:
        return self.meta.joinpath(*key.split("/")[:-1], key.rsplit("/", 1)[-1] + ".json")

    def _image(self, key: str) -> Path:
        return self.meta.joinpath(*key.split("/")[:-1], key.rsplit("/", 1)[-1] + ".img")

    def _record(self, key: str) -> dict[str, Any] | None:
        return self._records.get(key)

    def _write_record(self, key: str, record: dict[str, Any]) -> None:
        path = self._record_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(record))
        tmp.rename(path)
        self._records[key] = record
