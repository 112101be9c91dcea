"""On etcd, any number of API servers serve one cluster: what one commits, another serves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest


@pytest.mark.slow
def test_two_api_servers_on_one_etcd(etcd_cli_cluster, tmp_path, port_pair):
    first = etcd_cli_cluster
    (tmp_path / "web.cca").write_text("service web { image nginx:1.27  instances 2 }\n")
    assert first.cca("apply", str(tmp_path / "web.cca")).exit_code == 0
    port = port_pair()
    pki = first.home / "clusters" / "default"
    log = open(tmp_path / "second.log", "wb")  # noqa: SIM115
    second = subprocess.Popen(
        [str(Path(sys.executable).parent / "cca"), "server", "--store", first.store_url,
         "--listen", f"127.0.0.1:{port}", "--token-listen", f"127.0.0.1:{port + 1}", "--pki", str(pki),
         "--metrics", "off", "--no-runner"],
        env=os.environ | first.env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            result = first.cca("get", "services", "-o", "json", "--server", f"127.0.0.1:{port}")
            if result.exit_code == 0:
                break
            assert second.poll() is None, (tmp_path / "second.log").read_text()
            time.sleep(0.3)
        assert [s["value"]["image"] for s in json.loads(result.output)] == ["nginx:1.27"]
        (tmp_path / "web.cca").write_text("service web { image nginx:1.28  instances 2 }\n")
        assert first.cca("apply", str(tmp_path / "web.cca"), "--server", f"127.0.0.1:{port}").exit_code == 0
        seen = json.loads(first.cca("get", "services", "-o", "json").output)
        assert seen[0]["value"]["image"] == "nginx:1.28"
    finally:
        second.terminate()
        second.wait(10)
        log.close()
