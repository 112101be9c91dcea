"""`cca agent debug` (the seed's spelling of `cca agent --debug`): the runtime's view of a state dir
as JSON — every container with its state, pid, exit code, usage and log size (agent/debug.py) —
and clear errors, never a traceback, for a wrong action, runtime or state dir."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ccattler.agent.runtime.base import ContainerSpec
from ccattler.agent.runtime.process import ProcessRuntime
from ccattler.cli.main import app
from tests.cli.conftest import CCA


def cca(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def text(result) -> str:
    """The output with rich's error box taken off, whitespace collapsed."""
    return " ".join(result.output.replace("│", " ").replace("╭", " ").replace("╰", " ").split())


def clean_exit(result, code: int) -> None:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


@pytest.fixture
def containers(tmp_path: Path):
    """A process-runtime state dir holding a running container and one that exited with code 3."""
    runtime = ProcessRuntime(tmp_path / "state")
    web = ContainerSpec("shop/web-1", "busybox", command="echo hello; exec sleep 30", spec_hash="h1")
    runtime.create(web)
    runtime.start("shop/web-1")
    runtime.create(ContainerSpec("shop/job-1", "busybox", command="exit 3", spec_hash="h2"))
    runtime.start("shop/job-1")
    deadline = time.monotonic() + 10
    while runtime.status("shop/job-1").state != "exited" or b"hello" not in runtime.logs("shop/web-1"):
        assert time.monotonic() < deadline, "containers did not settle"
        time.sleep(0.05)
    yield tmp_path / "state", runtime
    for status in runtime.list():
        runtime.remove(status.name)


def test_debug_prints_each_container_as_json(containers) -> None:
    state, runtime = containers
    result = cca("agent", "debug", "--runtime", "process", "--state-dir", str(state))
    clean_exit(result, 0)
    report = json.loads(result.output)
    assert report["runtime"] == "process"
    by_name = {c["name"]: c for c in report["containers"]}
    assert list(by_name) == ["shop/job-1", "shop/web-1"]  # sorted by name
    web, job = by_name["shop/web-1"], by_name["shop/job-1"]
    assert (web["state"], web["spec_hash"], web["exit_code"]) == ("running", "h1", None)
    assert web["pid"] == runtime.status("shop/web-1").pid and web["started_at"]
    assert web["usage"]["memory"] > 0 and web["usage"]["cpu_seconds"] >= 0
    assert web["log_bytes"] >= len(b"hello\n")
    # The process runtime learns an exit code by reaping its own child: a look from another
    # process (this command, beside a running agent) sees it exited, without the code.
    assert (job["state"], job["exit_code"], job["reason"], job["usage"]) == ("exited", None, "exited", None)
    # `--debug` is the same report.
    again = json.loads(cca("agent", "--debug", "--runtime", "process", "--state-dir", str(state)).output)
    assert [(c["name"], c["state"], c["pid"]) for c in again["containers"]] == \
        [(c["name"], c["state"], c["pid"]) for c in report["containers"]]


def test_debug_of_a_state_dir_without_containers_and_of_the_sim_runtime(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = cca("agent", "debug", "--runtime", "process", "--state-dir", str(tmp_path / "empty"))
    clean_exit(result, 0)
    assert json.loads(result.output) == {"runtime": "process", "containers": []}
    result = cca("agent", "debug", "--runtime", "sim", "--state-dir", str(tmp_path / "none"))
    clean_exit(result, 0)
    assert json.loads(result.output) == {"runtime": "sim", "containers": []}
    assert not (tmp_path / "none").exists()  # the sim runtime keeps nothing on disk


@pytest.mark.parametrize(("args", "code", "message"), [
    (["agent", "bogus", "--runtime", "process"], 2,
     "Invalid value for ACTION: 'bogus': the only action is `debug` (or run the agent without one)"),
    (["agent", "debug", "extra"], 2, "unexpected extra argument"),
    (["agent", "debug", "--runtime", "nope"], 2, "Invalid value for --runtime: 'nope' is not one of runc, "
                                                 "process, sim"),
])
def test_bad_actions_and_runtimes_are_refused_clearly(args, code, message) -> None:
    result = cca(*args)
    clean_exit(result, code)
    assert message in text(result), result.output
    assert not result.output.lstrip().startswith("{")  # no report printed


def test_a_missing_state_dir_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    result = cca("agent", "debug", "--runtime", "process", "--state-dir", str(missing))
    clean_exit(result, 1)
    assert f"error: no agent state at {missing}: no agent has run with this state dir (check --state-dir" \
        in result.output, result.output
    assert not missing.exists()


def test_a_file_as_state_dir_is_an_error_without_a_traceback(tmp_path: Path) -> None:
    file = tmp_path / "state"
    file.write_text("not a directory")
    result = cca("agent", "debug", "--runtime", "runc", "--state-dir", str(file))
    clean_exit(result, 2)
    assert f"Invalid value for --state-dir: {file} is not a directory" in text(result), result.output
    # The installed command too: a message on stderr, no traceback.
    done = subprocess.run([CCA, "agent", "debug", "--runtime", "process", "--state-dir", str(file)],
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                                           "COLUMNS": "200"})
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert "is not a directory" in done.stderr and "Traceback" not in done.stderr, done.stderr
