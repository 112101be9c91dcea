"""The bpf() system call through ctypes: open pinned maps and read, write, delete and walk their
elements (batched where the kernel allows). Kept tiny on purpose: programs are loaded and attached
with bpftool (bpf/loader.py); only map traffic, which is the hot path, goes through here.

Every attribute block is zeroed to its full size first: the kernel refuses (EINVAL) an attribute
whose bytes past the command's own fields are not zero (measured: BPF_MAP_DELETE_ELEM fails so).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Iterator
from dataclasses import dataclass

_NR_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine())
_libc = ctypes.CDLL(None, use_errno=True)
_ATTR_SIZE = 128

MAP_LOOKUP_ELEM, MAP_UPDATE_ELEM, MAP_DELETE_ELEM, MAP_GET_NEXT_KEY = 1, 2, 3, 4
OBJ_GET, OBJ_GET_INFO_BY_FD = 7, 15
MAP_LOOKUP_BATCH, MAP_UPDATE_BATCH, MAP_DELETE_BATCH = 24, 26, 27
ANY = 0


class BpfError(OSError):
    """A bpf() call failed; the message names the command and the map."""


def _call(cmd: int, attr: ctypes.Array, what: str) -> int:
    if _NR_BPF is None:
        raise BpfError(errno.ENOSYS, f"bpf(): unsupported machine {platform.machine()}")
    result = _libc.syscall(_NR_BPF, cmd, ctypes.byref(attr), _ATTR_SIZE)
    if result < 0:
        err = ctypes.get_errno()
        raise BpfError(err, f"{what}: {os.strerror(err)}")
    return result


def _attr(*fields: tuple[int, str, int]) -> ctypes.Array:
    """A zeroed attribute block with (offset, struct format, value) fields written in."""
    buf = (ctypes.c_char * _ATTR_SIZE)()
    for offset, fmt, value in fields:
        struct.pack_into(fmt, buf, offset, value)
    return buf


def _addr(buf: ctypes.Array | None) -> int:
    return ctypes.addressof(buf) if buf is not None else 0


@dataclass
class MapInfo:
    type: int
    key_size: int
    value_size: int
    max_entries: int
    name: str


class Map:
    """One pinned BPF map, opened by path; keys and values are bytes of the map's sizes."""

    def __init__(self, path: str) -> None:
        self.path = path
        name = ctypes.create_string_buffer(path.encode())
        self.fd = _call(OBJ_GET, _attr((0, "Q", ctypes.addressof(name))), f"open pinned map {path}")
        self.info = self._info()
        self._batch_ok = True

    def _info(self) -> MapInfo:
        info = (ctypes.c_char * 88)()
        _call(OBJ_GET_INFO_BY_FD, _attr((0, "I", self.fd), (4, "I", len(info)), (8, "Q", _addr(info))),
              f"info of {self.path}")
        kind, _id, key, value, entries, _flags = struct.unpack_from("6I", info)
        return MapInfo(kind, key, value, entries, bytes(info[24:40]).split(b"\0")[0].decode())

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Map:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _buf(self, data: bytes, size: int, what: str) -> ctypes.Array:
        if len(data) != size:
            raise ValueError(f"{self.info.name}: {what} is {len(data)} bytes, the map's is {size}")
        return ctypes.create_string_buffer(data, size)

    def lookup(self, key: bytes) -> bytes | None:
        k = self._buf(key, self.info.key_size, "key")
        v = ctypes.create_string_buffer(self.info.value_size)
        try:
            _call(MAP_LOOKUP_ELEM, _attr((0, "I", self.fd), (8, "Q", _addr(k)), (16, "Q", _addr(v))),
                  f"lookup in {self.info.name}")
        except BpfError as e:
            if e.errno == errno.ENOENT:
                return None
            raise
        return v.raw

    def update(self, key: bytes, value: bytes, flags: int = ANY) -> None:
        k = self._buf(key, self.info.key_size, "key")
        v = self._buf(value, self.info.value_size, "value")
        _call(MAP_UPDATE_ELEM, _attr((0, "I", self.fd), (8, "Q", _addr(k)), (16, "Q", _addr(v)),
                                     (24, "Q", flags)), f"update in {self.info.name}")

    def delete(self, key: bytes) -> bool:
        """Delete `key`; False when it was not there."""
        k = self._buf(key, self.info.key_size, "key")
        try:
            _call(MAP_DELETE_ELEM, _attr((0, "I", self.fd), (8, "Q", _addr(k))),
                  f"delete in {self.info.name}")
        except BpfError as e:
            if e.errno == errno.ENOENT:
                return False
            raise
        return True

    def walk(self) -> Iterator[bytes]:
        """Every key (a walk with GET_NEXT_KEY; a key deleted meanwhile restarts it harmlessly)."""
        size = self.info.key_size
        prev: ctypes.Array | None = None
        nxt = ctypes.create_string_buffer(size)
        while True:
            try:
                attr = _attr((0, "I", self.fd), (8, "Q", _addr(prev)), (16, "Q", _addr(nxt)))
                _call(MAP_GET_NEXT_KEY, attr, f"walk {self.info.name}")
            except BpfError as e:
                if e.errno == errno.ENOENT:
                    return
                raise
            yield nxt.raw
            prev = ctypes.create_string_buffer(nxt.raw, size)

    def read_all(self) -> dict[bytes, bytes]:
        """Every element (a walk; the batched read is not used until its test passes here)."""
        if False:  # noqa: SIM108
            try:
                return self._read_batched()
            except BpfError as e:
                if e.errno not in (errno.EINVAL, 524):  # 524: ENOTSUPP, the map type has no batch ops
                    raise
                self._batch_ok = False
        out = {}
        for key in list(self.walk()):
            value = self.lookup(key)
            if value is not None:
                out[key] = value
        return out

    def _read_batched(self, chunk: int = 4096) -> dict[bytes, bytes]:
        ks, vs = self.info.key_size, self.info.value_size
        keys = ctypes.create_string_buffer(ks * chunk)
        values = ctypes.create_string_buffer(vs * chunk)
        token_in = ctypes.create_string_buffer(max(ks, 8))
        token_out = ctypes.create_string_buffer(max(ks, 8))
        out: dict[bytes, bytes] = {}
        first = True
        while True:
            count = ctypes.c_uint32(chunk)
            attr = _attr((0, "Q", 0 if first else _addr(token_in)), (8, "Q", _addr(token_out)),
                         (16, "Q", _addr(keys)), (24, "Q", _addr(values)), (32, "I", chunk),
                         (36, "I", self.fd))
            done = False
            try:
                _call(MAP_LOOKUP_BATCH, attr, f"batch read of {self.info.name}")
            except BpfError as e:
                if e.errno != errno.ENOENT:  # ENOENT: the last chunk (count says how many came)
                    raise
                done = True
            count.value = struct.unpack_from("I", attr, 32)[0]
            raw_k, raw_v = keys.raw, values.raw
            for i in range(count.value):
                out[raw_k[i * ks:(i + 1) * ks]] = raw_v[i * vs:(i + 1) * vs]
            if done:
                return out
            ctypes.memmove(token_in, token_out, len(token_out))
            first = False

    def update_many(self, pairs: list[tuple[bytes, bytes]], chunk: int = 8192) -> None:
        """Write every pair: BPF_MAP_UPDATE_BATCH in chunks where the kernel has it, else one call
        each. Not atomic across chunks: callers order their writes so every prefix is consistent."""
        ks, vs = self.info.key_size, self.info.value_size
        for key, value in pairs:
            if len(key) != ks or len(value) != vs:
                raise ValueError(f"{self.info.name}: a pair is not {ks}+{vs} bytes")
        for start in range(0, len(pairs), chunk):
            part = pairs[start:start + chunk]
            if self._batch_ok:
                keys = ctypes.create_string_buffer(b"".join(k for k, _ in part), ks * len(part))
                values = ctypes.create_string_buffer(b"".join(v for _, v in part), vs * len(part))
                try:
                    _call(MAP_UPDATE_BATCH, _attr((16, "Q", _addr(keys)), (24, "Q", _addr(values)),
                                                  (32, "I", len(part)), (36, "I", self.fd)),
                          f"batch update in {self.info.name}")
                    continue
                except BpfError as e:
                    if e.errno not in (errno.EINVAL, 524):  # 524: ENOTSUPP
                        raise
                    self._batch_ok = False
            for key, value in part:
                self.update(key, value)

    def delete_many(self, keys: list[bytes]) -> None:
        """Delete every key there is (absent ones are skipped)."""
        for key in keys:
            self.delete(key)
