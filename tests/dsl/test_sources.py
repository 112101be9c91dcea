"""Quantities are read once into millicores, bytes and milliseconds; `from` never leaves its tree."""

import os

import pytest

from ccattler.dsl import Source, compile_with_diagnostics, read_relative
from ccattler.dsl import quantities as q
from ccattler.dsl.sources import SourceError


@pytest.mark.parametrize("reader, text, value", [
    pytest.param(q.cpu, "500m", 500, id="cpu-millicores"),
    pytest.param(q.cpu, "2", 2000, id="cpu-cores"),
    pytest.param(q.cpu, "1.5", 1500, id="cpu-decimal"),
    pytest.param(q.cpu, "5m", 5, id="cpu-5m-is-millicores"),
    pytest.param(q.size, "512Mi", 536870912, id="size-binary"),
    pytest.param(q.size, "100M", 100000000, id="size-decimal"),
    pytest.param(q.size, "1Ti", 2**40, id="size-tebi"),
    pytest.param(q.size, "4096", 4096, id="size-bytes"),
    pytest.param(q.duration, "500ms", 500, id="ms"),
    pytest.param(q.duration, "10s", 10000, id="seconds"),
    pytest.param(q.duration, "5m", 300000, id="duration-5m-is-minutes"),
    pytest.param(q.duration, "1h", 3600000, id="hours"),
    pytest.param(q.duration, "1.5s", 1500, id="decimal-seconds"),
    pytest.param(q.clock, "8:05", "08:05", id="clock"),
    pytest.param(q.percent_or_number, "60%", (60, True), id="percent"),
])
def test_quantities(reader, text, value):
    assert reader(text) == value


@pytest.mark.parametrize("reader, text, code", [
    (q.cpu, "0.0001", "bad-quantity"), (q.cpu, "-1", "negative"), (q.size, "1.5", "bad-quantity"),
    (q.size, "12XB", "bad-quantity"), (q.duration, "10", "bad-duration"), (q.duration, "3y", "bad-duration"),
    (q.port, "0", "port-range"), (q.count, "1e3", "bad-count"), (q.clock, "24:00", "bad-time"),
    (q.count, "9" * 5000, "bad-count"), (q.cpu, "9" * 5000, "bad-quantity"),
    (q.size, "9000Pi", "bad-quantity"), (q.duration, "99999999999d", "bad-duration"),
])
def test_bad_quantities(reader, text, code):
    with pytest.raises(q.QuantityError) as err:
        reader(text)
    assert err.value.code == code


def test_from_reads_below_the_source(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "a.conf").write_text("x=1\n")
    source = Source("app.cca", "", tmp_path)
    assert read_relative(source, "conf/a.conf") == "x=1\n"
    with pytest.raises(SourceError, match="outside"):
        read_relative(source, "../etc/passwd")
    with pytest.raises(SourceError, match="not found"):
        read_relative(source, "conf/missing")


def test_from_refuses_symlinks_out_of_the_tree(tmp_path):
    inside = tmp_path / "project"
    inside.mkdir()
    (tmp_path / "secret.txt").write_text("s3cret")
    os.symlink(tmp_path / "secret.txt", inside / "link.txt")
    with pytest.raises(SourceError, match="outside"):
        read_relative(Source("a.cca", "", inside), "link.txt")


def test_custom_reader_is_used():
    text = 'service a { image x  config { file "/etc/a" from "a.conf" } }'
    facts, diagnostics = compile_with_diagnostics([Source("a.cca", text, None)],
                                                  reader=lambda source, rel: f"{source.name}:{rel}")
    assert facts["desired/service/default/a"]["config"]["files"][0]["content"] == "a.cca:a.conf"
