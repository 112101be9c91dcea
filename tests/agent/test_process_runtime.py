"""The process runtime (no root needed): lifecycle, exit codes, logs, exec, stats, files."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from ccattler.agent.runtime.base import ConfigFile, ContainerError, ContainerSpec
from ccattler.agent.runtime.process import ProcessRuntime


def wait_for(predicate, timeout: float = 5.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def runtime(tmp_path: Path):
    runtime = ProcessRuntime(tmp_path)
    yield runtime
    for status in runtime.list():
        runtime.remove(status.name)


def test_lifecycle_logs_exec_and_files(runtime: ProcessRuntime) -> None:
    command = "cat conf/app.conf; echo $GREETING; exec sleep 30"
    spec = ContainerSpec("default/web-a", "busybox", command=command,
                         env={"GREETING": "hi"}, files=(ConfigFile("/conf/app.conf", "port 80"),),
                         spec_hash="h1")
    runtime.create(spec)
    assert runtime.status(spec.name).state == "created"
    runtime.start(spec.name)
    status = runtime.status(spec.name)
    assert (status.state, status.spec_hash) == ("running", "h1")
    wait_for(lambda: b"hi\n" in runtime.logs(spec.name))
    assert runtime.logs(spec.name) == b"port 80hi\n"
    assert runtime.exec(spec.name, ["sh", "-c", "echo $HOSTNAME"]).stdout == b"web-a\n"
    assert runtime.stats(spec.name).memory_bytes > 0
    runtime.stop(spec.name, timeout=2)
    assert runtime.status(spec.name).state == "exited"
    runtime.remove(spec.name)
    assert runtime.list() == []


def test_exit_code_is_the_reason(runtime: ProcessRuntime) -> None:
    runtime.create(ContainerSpec("default/job", "busybox", command="exit 3"))
    runtime.start("default/job")
    wait_for(lambda: runtime.status("default/job").state == "exited")
    status = runtime.status("default/job")
    assert (status.exit_code, status.reason) == (3, "exited with code 3")


def test_a_killed_process_is_seen_exited_and_found_again_by_a_new_runtime(runtime: ProcessRuntime,
                                                                          tmp_path: Path) -> None:
    runtime.create(ContainerSpec("default/web-a", "busybox", command="exec sleep 30"))
    runtime.start("default/web-a")
    again = ProcessRuntime(tmp_path)  # an agent restart: no Popen handles, pid + start time only
    assert again.status("default/web-a").state == "running"
    os.kill(runtime.status("default/web-a").pid, signal.SIGKILL)
    wait_for(lambda: runtime.status("default/web-a").state == "exited")
    assert again.status("default/web-a").state == "exited"


def test_needs_a_command(runtime: ProcessRuntime) -> None:
    with pytest.raises(ContainerError, match="needs a command"):
        runtime.create(ContainerSpec("default/web-a", "busybox"))


def test_logs_rotate_past_their_limit_and_read_whole(tmp_path: Path) -> None:
    runtime = ProcessRuntime(tmp_path, max_log_bytes=1000)
    runtime.create(ContainerSpec("default/chatty", "busybox", command="seq 1 500; exec sleep 30"))
    runtime.start("default/chatty")
    try:
        wait_for(lambda: runtime.logs("default/chatty").endswith(b"500\n"))
        runtime.prune()
        folder = next((tmp_path / "processes").iterdir())
        assert (folder / "log").stat().st_size == 0 and (folder / "log.1").stat().st_size > 1000
        assert runtime.logs("default/chatty").splitlines()[-1] == b"500"
        assert runtime.logs("default/chatty", tail_bytes=4) == b"500\n"
    finally:
        runtime.remove("default/chatty")
