"""Init steps as a user meets them on `cca up` with runc: steps run in order (with the secret and
the volume) before the main process; a failing step is retried, then the instance is failed with
the step, exit code and output shown in `cca get instances` (REASON), `cca describe instance`
and `cca logs --init`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CCA = (sys.executable, "-m", "ccattler.cli.main")
APP = """
secret token
volume scratch { size 16Mi }
service ok {
    image busybox
    command "cat /work/steps; exec sleep 600"
    resources { cpu 100m  memory 32Mi }
    secret token
    volume scratch "/work"
    init { exec "echo first $(cat /run/secrets/token) > /work/steps"  timeout 30s }
    init { exec "echo second >> /work/steps"  timeout 30s }
}
service broken {
    image busybox
    command "exec sleep 600"
    resources { cpu 100m  memory 32Mi }
    init { exec "echo cannot reach the database; exit 4"  timeout 30s  retry 1 }
}
"""


def test_init_steps_order_failure_and_reason(root, shell, node_state: Path, network_names, port: int, wait,
                                             tmp_path: Path) -> None:
    shell.up_local(port, node_state, network_names)
    try:
        app = tmp_path / "app.cca"
        app.write_text(APP)
        subprocess.run([*CCA, "secret", "set", "token"], input=b"tok3n", env=shell.env, check=True,
                       capture_output=True)
        shell.cca("apply", str(app))

        def instance(service: str, state: str) -> dict | None:
            return next((i for i in shell.instances() if i["service"] == f"default/{service}"
                         and i["state"] == state), None)

        ok = wait(lambda: instance("ok", "running"), "ok to run after its init steps", 60)
        wait(lambda: shell.cca("logs", "ok").stdout.strip(), "ok's output", 30)
        assert shell.cca("logs", "ok").stdout.splitlines() == [f"[{ok['name']}] first tok3n",
                                                               f"[{ok['name']}] second"]
        init_log = shell.cca("logs", "--init", "ok").stdout
        assert "--- init step 1/2: echo first" in init_log and init_log.index("1/2") < init_log.index("2/2")

        broken = wait(lambda: instance("broken", "failed"), "broken to fail its init step", 60)
        assert "exit code 4 after 2 attempt(s): cannot reach the database" in broken["reason"]
        table = shell.cca("get", "instances").stdout
        assert "REASON" in table.splitlines()[0] and "init step 1/1" in table
        described = shell.cca("describe", "instance", broken["name"]).stdout
        assert "Init steps:       0/1 passed" in described
        assert "step 1 failed (exit code 4, 2 attempt(s))" in described
        assert "| cannot reach the database" in described
        assert shell.cca("logs", "--init", "broken").stdout.count("cannot reach the database\n") == 2
    finally:
        shell.cca("down")
