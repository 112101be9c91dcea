"""Service groups as a user meets them on `cca up` with runc: `share network` members get one
address and reach each other on localhost, `share volume` is one directory in both, and admission
refuses members whose ports clash, naming both."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

APP = """
volume data { size 16Mi }
service web {
    image busybox
    command "echo web > /shared/data/note; mkdir /w; echo hello > /w/index.html; exec httpd -f -p 8080 -h /w"
    expose 8080
    resources { cpu 100m  memory 32Mi }
}
service helper {
    image busybox
    command "exec sleep 600"
    resources { cpu 100m  memory 32Mi }
}
group pod {
    service web
    service helper
    share network
    share volume data
}
"""
CLASH = """
service a {
    image busybox
    expose 8080
    resources { cpu 100m  memory 32Mi }
}
service b {
    image busybox
    expose 8080
    resources { cpu 100m  memory 32Mi }
}
group g {
    service a
    service b
    share network
}
"""


def test_shared_network_and_volume_on_a_cluster(root, shell, node_state: Path, network_names, port: int, wait,
                                                tmp_path: Path) -> None:
    shell.up_local(port, node_state, network_names)
    try:
        clash = tmp_path / "clash.cca"
        clash.write_text(CLASH)
        refused = shell.cca("apply", str(clash), check=False)
        assert refused.returncode != 0
        assert "default/a and default/b both listen on tcp 8080" in refused.stdout + refused.stderr

        app = tmp_path / "app.cca"
        app.write_text(APP)
        shell.cca("apply", str(app))

        def running() -> list[dict] | None:
            rows = [i for i in shell.instances() if i["state"] == "running"]
            return rows if len(rows) == 2 else None

        rows = wait(running, "both members to run", 90)
        web = next(r for r in rows if r["service"] == "default/web")
        helper = next(r for r in rows if r["service"] == "default/helper")
        assert web["ip"] == helper["ip"] and web["ip"], rows

        def from_helper(script: str) -> str:
            done = shell.cca("exec", helper["name"], "--", "sh", "-c", script, check=False)
            return done.stdout if done.returncode == 0 else ""

        assert wait(lambda: from_helper("wget -q -O - http://localhost:8080/"), "localhost to reach web",
                    30) == "hello\n"
        assert wait(lambda: from_helper("cat /shared/data/note"), "the shared volume", 30) == "web\n"
    finally:
        shell.cca("down")
