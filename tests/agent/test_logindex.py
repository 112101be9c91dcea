"""The log time index behind `cca logs --since`: checkpoints only for logs that grew, reading from
the last checkpoint at or before the time (at a line start), and the index moving with its log at
rotation."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ccattler.agent.runtime import logfile
from ccattler.agent.runtime.base import ContainerSpec
from ccattler.agent.runtime.logindex import LogIndexer, read_since
from ccattler.agent.runtime.process import ProcessRuntime


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Logs:
    """A runtime with two containers' log files and nothing else."""

    def __init__(self, root: Path) -> None:
        self.paths = [root / "a" / "log", root / "b" / "log"]
        for path in self.paths:
            path.parent.mkdir(parents=True)
            path.touch()

    def log_paths(self) -> list[Path]:
        return [p for p in self.paths if p.parent.exists()]


def write(path: Path, text: str) -> None:
    with open(path, "a") as handle:
        handle.write(text)


def test_only_logs_that_grew_get_a_checkpoint(tmp_path: Path) -> None:
    logs, clock = Logs(tmp_path), Clock()
    indexer = LogIndexer(logs, clock=clock)
    a, b = logs.paths
    assert indexer.checkpoint() == 0 and not logfile.index_path(a).exists()  # empty: nothing to say
    write(a, "one\n")
    assert indexer.checkpoint() == 1
    clock.now += 1
    assert indexer.checkpoint() == 0  # quiet: no write
    write(a, "two\n")
    write(b, "x\n")
    assert indexer.checkpoint() == 2
    assert logfile.read_checkpoints(logfile.index_path(a)) == [(1000.0, 4), (1001.0, 8)]
    assert logfile.read_checkpoints(logfile.index_path(b)) == [(1001.0, 2)]


def test_a_restarted_indexer_continues_the_index(tmp_path: Path) -> None:
    logs, clock = Logs(tmp_path), Clock()
    a = logs.paths[0]
    write(a, "one\n")
    LogIndexer(logs, clock=clock).checkpoint()
    clock.now += 5
    assert LogIndexer(logs, clock=clock).checkpoint() == 0  # the index already says 4 bytes
    write(a, "two\n")
    assert LogIndexer(logs, clock=clock).checkpoint() == 1


def test_since_starts_at_the_last_checkpoint_before_it(tmp_path: Path) -> None:
    logs, clock = Logs(tmp_path), Clock()
    indexer = LogIndexer(logs, clock=clock)
    a = logs.paths[0]
    write(a, "old-1\nold-2\n")
    indexer.checkpoint()  # t=1000
    clock.now = 1060
    write(a, "new-1\n")
    indexer.checkpoint()  # t=1060
    clock.now = 1061
    write(a, "new-2\n")  # not indexed yet: after every checkpoint
    assert read_since(a, None)[0] == b"old-1\nold-2\nnew-1\nnew-2\n"
    assert read_since(a, 1030)[0] == b"new-1\nnew-2\n"  # from the 1000 checkpoint's end
    assert read_since(a, 1060.5)[0] == b"new-2\n"
    assert read_since(a, 999)[0] == b"old-1\nold-2\nnew-1\nnew-2\n"  # before the first: all of it
    assert read_since(a, 5000) == (b"new-2\n", 24)  # the last checkpoint still counts
    assert read_since(a, 1030)[1] == 24  # following continues at the end of `log`


def test_a_checkpoint_inside_a_line_starts_at_the_next_line(tmp_path: Path) -> None:
    logs, clock = Logs(tmp_path), Clock()
    a = logs.paths[0]
    write(a, "whole\nhalf a li")
    LogIndexer(logs, clock=clock).checkpoint()
    write(a, "ne\nlater\n")
    assert read_since(a, 1000.5)[0] == b"later\n"


def test_rotation_moves_the_index_and_since_reaches_into_log_1(tmp_path: Path) -> None:
    logs, clock = Logs(tmp_path), Clock()
    indexer = LogIndexer(logs, clock=clock)
    a = logs.paths[0]
    write(a, "r-1\n")
    indexer.checkpoint()  # t=1000 → 4
    clock.now = 1010
    write(a, "r-2\n")
    indexer.checkpoint()  # t=1010 → 8
    assert logfile.rotate(a, max_bytes=4)
    rotated = logfile.rotated_path(a)
    assert rotated.read_bytes() == b"r-1\nr-2\n" and a.read_bytes() == b""
    assert logfile.read_checkpoints(logfile.index_path(rotated)) == [(1000.0, 4), (1010.0, 8)]
    rotated_at = logfile.read_checkpoints(logfile.index_path(a))[0][0]  # the new index starts at 0
    assert logfile.read_checkpoints(logfile.index_path(a)) == [(rotated_at, 0)]
    clock.now = rotated_at + 10
    write(a, "c-1\n")
    assert indexer.checkpoint() == 1  # seen as shrunk: indexed from 0 again
    assert logfile.read_checkpoints(logfile.index_path(a))[-1] == (clock.now, 4)
    assert read_since(a, 1005) == (b"r-2\nc-1\n", 4)  # the later part of log.1, then log
    assert read_since(a, 900)[0] == b"r-1\nr-2\nc-1\n"
    assert read_since(a, rotated_at + 1)[0] == b"c-1\n"  # after the rotation: log.1 is skipped
    # the next rotation replaces log.1 and its index
    write(a, "c-2\n")
    assert logfile.rotate(a, max_bytes=4)
    assert logfile.read_checkpoints(logfile.index_path(rotated))[-1] == (clock.now, 4)


def test_an_index_past_a_size_bound_rotates_a_small_log(tmp_path: Path) -> None:
    a = Logs(tmp_path).paths[0]
    write(a, "x\n")
    for n in range(20):
        logfile.append_checkpoint(logfile.index_path(a), 1000 + n, 2)
    assert not logfile.rotate(a, max_bytes=4096)  # 20 lines of 11 bytes: under 4096 / 8
    for n in range(30):
        logfile.append_checkpoint(logfile.index_path(a), 2000 + n, 2)
    assert logfile.rotate(a, max_bytes=4096)


def test_a_removed_container_is_forgotten_and_a_new_one_indexed_from_zero(tmp_path: Path) -> None:
    logs, clock = Logs(tmp_path), Clock()
    indexer = LogIndexer(logs, clock=clock)
    a = logs.paths[0]
    write(a, "first container, a long line\n")
    indexer.checkpoint()
    a.unlink()
    logfile.index_path(a).unlink()
    write(a, "second\n")  # shorter than what was indexed for the old one
    clock.now += 1
    assert indexer.checkpoint() == 1
    assert logfile.read_checkpoints(logfile.index_path(a)) == [(1001.0, 7)]


def test_torn_index_lines_are_skipped(tmp_path: Path) -> None:
    a = Logs(tmp_path).paths[0]
    write(a, "a\nb\n")
    logfile.index_path(a).write_text("1000.000 2\ngarbage\n1001.0")
    assert read_since(a, 1000.5)[0] == b"b\n"


def test_the_process_runtime_is_indexed_and_read_since(tmp_path: Path) -> None:
    runtime = ProcessRuntime(tmp_path)
    command = "echo early; read x < fifo; echo late; exec sleep 30"
    spec = ContainerSpec("default/p-a", "busybox", command=command, spec_hash="h")
    runtime.create(spec)
    root = tmp_path / "processes"
    os.mkfifo(next(root.iterdir()) / "root" / "fifo")
    runtime.start(spec.name)
    try:
        clock = Clock(time.time())
        indexer = LogIndexer(runtime, clock=clock)
        path = runtime.log_path(spec.name)
        deadline = time.monotonic() + 5
        while path.read_bytes() != b"early\n":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert indexer.checkpoint() == 1
        with open(next(root.iterdir()) / "root" / "fifo", "w") as fifo:
            fifo.write("go\n")
        while path.read_bytes() != b"early\nlate\n":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert read_since(path, clock.now + 0.5)[0] == b"late\n"
    finally:
        runtime.remove(spec.name)
    assert list(root.iterdir()) == []  # the index went with the container
