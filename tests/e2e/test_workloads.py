"""Workload features as a user meets them, on `cca up` with real runc: `cca logs -f` streams lines
from two instances, `cca exec` runs a command (with stdin) and returns its exit code, a secret set
with `cca secret set` is readable at its mount path and nowhere else (store, describe, process
list), a rotation rewrites the file in the running container and it is gone after stop, `cca top
workloads` shows memory of running containers, a stateful service starts `db-1` only once `db-0` is
ready, `cca node-inspect` the node's runtime, `cca metric
set` writes a metric, a failing readiness probe keeps an instance out of its endpoints and a
failing liveness probe restarts it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CCA = (sys.executable, "-m", "ccattler.cli.main")
SECRET = "s3cr3t-7d1e-value"
ROTATED = "r0tated-44b2-value"
APP = """
secret token
connection db {
    driver postgres
    host talk
    port 5432
    user "app user"
    secret token
    database "my/db"
}
service talk {
    image busybox
    command "i=0; while true; do echo line-$i; i=$((i+1)); sleep 0.3; done"
    instances 2
    resources { cpu 100m  memory 32Mi }
    secret token
    connection db
}
service db {
    image busybox
    command "exec sleep 600"
    instances 2
    stateful
    volume data "/data"
    resources { cpu 100m  memory 32Mi }
    readiness { exec "test -f /tmp/ready"  every 1s  timeout 10s }
}
volume data { persistent true  size 16Mi }
service gated {
    image busybox
    command "exec httpd -f -p 8080 -h /"
    instances 1
    expose 8080
    resources { cpu 100m  memory 32Mi }
    readiness { exec "test -f /tmp/ready"  every 1s  timeout 10s }
    liveness { exec "test ! -f /tmp/die"  every 1s  timeout 10s  failure_threshold 2 }
}
"""


def endpoints(home: Path, service: str) -> list[str]:
    """The instances in the service's endpoint document (read-only from the server's SQLite file)."""
    with sqlite3.connect(f"file:{home}/state.db?mode=ro", uri=True) as db:
        key = f"derived/endpoint/default/{service}"
        row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
    return [e["instance"] for e in json.loads(row[0])["endpoints"]] if row else []


def test_logs_exec_secrets_probes(root, shell, node_state: Path, network_names, port: int, wait,
                                  tmp_path: Path) -> None:
    shell.up_local(port, node_state, network_names)
    try:
        app = tmp_path / "app.cca"
        app.write_text(APP)
        subprocess.run([*CCA, "secret", "set", "token"], input=SECRET.encode(), env=shell.env,
                       check=True, capture_output=True)
        shell.cca("apply", str(app))

        def running(service: str, count: int) -> list[dict]:
            mine = [i for i in shell.instances() if i["service"] == f"default/{service}"
                    and i["state"] == "running"]
            return mine if len(mine) == count else []

        talk = wait(lambda: running("talk", 2), "two talk instances to run", 60)
        names = sorted(i["name"] for i in talk)

        # cca logs -f: lines from both instances, each prefixed with its instance
        follow = subprocess.Popen([*CCA, "logs", "-f", "talk"], env=shell.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        seen: dict[str, int] = {name: 0 for name in names}
        deadline = time.monotonic() + 30
        try:
            while min(seen.values()) < 3:
                assert time.monotonic() < deadline, f"cca logs -f: too few lines {seen}"
                line = follow.stdout.readline()
                prefix, _, text = line.partition("] ")
                if prefix.lstrip("[") in seen and text.startswith("line-"):
                    seen[prefix.lstrip("[")] += 1
        finally:
            follow.kill()
            follow.wait()

        # cca exec: exit code propagated, stdin with -i, the secret readable at its mount path
        done = shell.cca("exec", names[0], "--", "sh", "-c", "cat /run/secrets/token; exit 3", check=False,
                         timeout=60)
        assert done.returncode == 3 and done.stdout == SECRET, done
        url = shell.cca("exec", names[0], "--", "cat", "/run/connections/db").stdout
        assert url == f"postgres://app%20user:{SECRET}@talk.default:5432/my%2Fdb"
        piped = subprocess.run([*CCA, "exec", "-i", names[1], "--", "sh", "-c", "read x; echo got $x"],
                               input="hello\n", env=shell.env, capture_output=True, text=True, timeout=60)
        assert piped.returncode == 0 and piped.stdout == "got hello\n", piped
        assert shell.cca("exec", names[0], "--", "false", check=False).returncode == 1

        # ... and nowhere else: not in the store's file, not in describe, not in any process's arguments
        assert SECRET.encode() not in (shell.home / "state.db").read_bytes()
        for wal in shell.home.glob("state.db-*"):
            assert SECRET.encode() not in wal.read_bytes()
        assert SECRET not in shell.cca("describe", "service", "talk").stdout
        assert SECRET not in shell.cca("get", "instances", "-o", "json").stdout
        assert SECRET not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout

        # rotation: the agent overwrites the file in the running container
        subprocess.run([*CCA, "secret", "set", "token"], input=ROTATED.encode(), env=shell.env, check=True,
                       capture_output=True)
        wait(lambda: shell.cca("exec", names[0], "--", "cat", "/run/secrets/token").stdout == ROTATED,
             "the rotated secret in the running container", 60)

        # cca top: usage the agent publishes; node-inspect asks the node's runtime; metric set
        def talk_usage() -> list[dict]:
            rows = json.loads(shell.cca("top", "workloads", "-o", "json").stdout)
            used = [r for r in rows if r["service"] == "default/talk" and (r["memory"] or 0) > 0]
            return used if len(used) == 2 else []

        assert all(r["pids"] >= 1 for r in wait(talk_usage, "memory of both talk instances in top", 60))
        node = talk[0]["node"]
        assert node in shell.cca("top", "nodes").stdout
        inspected = json.loads(shell.cca("node-inspect", node, "-o", "json").stdout)
        held = {c["name"]: c for c in inspected["runtime"]["containers"]}
        assert {f"default/{n}" for n in names} <= set(held) and inspected["runtime"]["runtime"] == "runc"
        assert held[f"default/{names[0]}"]["state"] == "running" and held[f"default/{names[0]}"]["log_bytes"]
        assert "observed/metric/default/talk/queue_depth/cli" in \
            shell.cca("metric", "set", "talk", "queue_depth", "12.5").stdout

        # a stateful service starts db-0, and db-1 only once db-0 is ready
        def state(name: str) -> dict | None:
            return next((i for i in shell.instances() if i["name"] == name), None)

        wait(lambda: (d := state("db-0")) and d["state"] == "running", "db-0 to run", 120)
        time.sleep(3)
        waiting = state("db-1")
        assert waiting["state"] == "pending" and "waiting for db-0" in waiting["reason"], waiting
        shell.cca("exec", "db-0", "--", "sh", "-c", "touch /tmp/ready; echo zero > /data/who")
        wait(lambda: (d := state("db-1")) and d["state"] == "running", "db-1 to start after db-0", 120)
        assert shell.cca("exec", "db-1", "--", "ls", "/data").stdout.split() == ["lost+found"]  # its own
        # the volume's size (delivered in the slice) is a loop-mounted image: writing past it fails
        fill = shell.cca("exec", "db-1", "--", "dd", "if=/dev/zero", "of=/data/fill", "bs=1M", "count=17",
                         check=False)
        assert fill.returncode != 0 and "No space left on device" in fill.stdout + fill.stderr, fill
        def described() -> str | None:
            out = shell.cca("describe", "instance", "db-0").stdout
            return out if "Volumes:" in out else None

        described = wait(described, "db-0's volume usage in describe", 30)
        assert "default/data/db-0 at /data:" in described and "of 16Mi (enforced)" in described, described

        # readiness gates endpoints; liveness restarts
        gated = wait(lambda: running("gated", 1), "the gated instance to run", 120)[0]
        time.sleep(2)
        assert not gated["ready"] and endpoints(shell.home, "gated") == []
        shell.cca("exec", gated["name"], "--", "touch", "/tmp/ready")
        wait(lambda: endpoints(shell.home, "gated") == [gated["name"]], "the ready instance in endpoints")
        shell.cca("exec", gated["name"], "--", "touch", "/tmp/die")
        wait(lambda: any(i["name"] == gated["name"] and i["restarts"] >= 1 for i in shell.instances()),
             "the liveness probe to restart the instance", 30)
        wait(lambda: endpoints(shell.home, "gated") == [], "the restarted instance to leave endpoints")
    finally:
        shell.cca("down")
    mounts = Path("/proc/self/mounts").read_text()
    assert str(node_state) not in mounts, "a secrets tmpfs (or another mount) outlived its container"
