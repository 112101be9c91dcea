"""The Python encodings of the BPF maps (bpf/maps.py) against the C structs of bpf/maps.h: a small
C program compiled with the host compiler prints each struct's size and field offsets."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from ccattler.bpf import maps

HEADER = Path(maps.__file__).with_name("maps.h")


def _offsets(fmt: str) -> list[int]:
    out, at = [], 0
    for code in _codes(fmt):
        out.append(at)
        at += struct.calcsize("=" + code)
    return out


def _codes(fmt: str) -> list[str]:
    codes, count = [], ""
    for ch in fmt.lstrip("="):
        if ch.isdigit():
            count += ch
        else:
            codes.append(count + ch)
            count = ""
    return codes


@pytest.fixture(scope="module")
def c_layouts(tmp_path_factory) -> dict[str, tuple[int, list[int]]]:
    if shutil.which("cc") is None:
        pytest.fail("cc is needed to compile bpf/maps.h", pytrace=False)
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <linux/types.h>", f'#include "{HEADER}"',
             "int main(void) {"]
    for name, (_, fields) in maps.LAYOUTS.items():
        offs = " ".join("%zu" for _ in fields)
        args = ", ".join(f"offsetof(struct {name}, {f})" for f in fields)
        lines.append(f'printf("{name} %zu {offs}\\n", sizeof(struct {name}), {args});')
    lines.append("return 0; }")
    src = tmp_path_factory.mktemp("layout") / "layout.c"
    src.write_text("\n".join(lines))
    exe = src.with_suffix("")
    subprocess.run(["cc", "-o", str(exe), str(src)], check=True, capture_output=True)
    rows = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    return {r.split()[0]: (int(r.split()[1]), [int(x) for x in r.split()[2:]]) for r in rows if r}


@pytest.mark.parametrize("name", sorted(maps.LAYOUTS))
def test_python_layout_matches_c(name, c_layouts):
    fmt, fields = maps.LAYOUTS[name]
    size, offsets = c_layouts[name]
    assert struct.calcsize(fmt) == size, f"struct {name}: C has {size} bytes"
    assert _offsets(fmt) == offsets, f"struct {name}: field offsets differ from C"


def test_encoders_round_trip():
    assert maps.parse_svc_key(maps.svc_key("10.96.0.1", 8080, "udp")) == ("10.96.0.1", 8080, "udp")
    assert maps.svc_key("10.96.0.1", 80, "tcp")[:6] == bytes([10, 96, 0, 1, 0, 80])  # network order
    assert maps.parse_backend_val(maps.backend_val("10.0.1.5", 5432)) == ("10.0.1.5", 5432)
    assert maps.parse_policy_key(maps.policy_key(7, 9, 443, "tcp")) == (7, 9, 443, "tcp")
    assert maps.policy_key(7, 9, 443, "tcp")[8:10] == struct.pack("=H", 443)  # host order
    assert maps.parse_ipcache_val(maps.ipcache_val(42)) == 42
