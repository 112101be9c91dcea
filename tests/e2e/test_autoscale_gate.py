"""Autoscaling on MEASURED requests/s (issue 18): a service behind a gate on `cca up --nodes 3`,
real HTTP requests sent to one node's gate, HAProxy's per-backend request counters (`req_tot`)
read by every node's agent and reported as `requests_per_second` samples (source `gate`); the
autoscaler scales 1 → 3 on them, and when the requests stop it holds the count for the down
window (explain says so) and then scales back to 1. Nothing is injected: no `cca metric set`.

Fast by the agents' documented `--metric-interval 1` (counters read every second, a steady sample
rewritten every 3 s) and the service's own short `stabilization` window. Needs root."""

from __future__ import annotations

import json
import secrets
import threading
import time

import pytest

from tests.e2e.netprobe import SERVE, http_get

pytestmark = pytest.mark.e2e

LISTEN = 18090  # the gate's port on each node address


@pytest.fixture
def metric_interval() -> float:
    return 1.0


class Load:
    """HTTP GETs through one node's gate, one connection each, as fast as they are answered."""

    def __init__(self, address: str, host: str) -> None:
        self.address, self.host = address, host
        self.sent = self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sent += 1
            try:
                status, _, _ = http_get(self.address, LISTEN, host=self.host, timeout=2)
                self.answered += status == 200
            except OSError:
                time.sleep(0.05)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def test_measured_requests_per_second_scale_up_and_back(three_nodes, tmp_path, wait) -> None:
    shell, tag = three_nodes.shell, secrets.token_hex(2)
    svc, host = f"rps{tag}", f"rps-{tag}.example.com"
    (tmp_path / "rps.cca").write_text(f"""
service {svc} {{
    image busybox
    command "{SERVE.format(port=8080)}"
    instances 1
    expose 8080
    resources {{ cpu 50m  memory 16Mi }}
    scale {{ horizontal {{ min 1 max 3 target requests_per_second = 5
                          stabilization {{ scale_up 0s scale_down 6s }} }} }}
}}
gate g{tag} {{
    host "{host}"
    path /
    target {svc} port 8080
    listen {LISTEN}
}}
""")
    shell.cca("apply", str(tmp_path / "rps.cca"), "--wait", "--timeout", "120", timeout=150)
    address = three_nodes.layout()["underlay"]["nodes"]["node-1"]["address"]

    def serves() -> bool:
        try:
            return http_get(address, LISTEN, host=host, timeout=2)[0] == 200
        except OSError:
            return False

    wait(serves, f"the gate on {address}:{LISTEN} to answer", timeout=60)

    def scaling() -> dict:
        return json.loads(shell.cca("explain", svc, "-o", "json").stdout)["scaling"]

    def term(doc: dict) -> dict:
        return next(t for t in doc["terms"] if t["metric"] == "requests_per_second")

    started = time.monotonic()
    with Load(address, host) as load:
        up = wait(lambda: (d := scaling())["desired"] == 3 and d, "the measured requests/s to scale up",
                  timeout=30)
        print(f"\nscaled to 3 after {time.monotonic() - started:.1f}s of load "
              f"({load.answered} of {load.sent} requests answered)")
        wait(lambda: len([i for i in shell.instances() if i["service"] == f"default/{svc}"]) == 3,
             "3 instances", timeout=30)
    rps = term(up)
    assert rps["sources"] == ["gate"], rps  # HAProxy's counters, not an injected sample
    assert rps["observed"] > 5 and rps["recommendation"] > 3, rps  # requests/s per instance
    assert up["clamp"] == "lowered to max 3" and up["term"] == "target requests_per_second"

    stopped = time.monotonic()
    # the first samples after the load are lower: the down window holds the count (6 s)
    text = wait(lambda: "held at 3" in (t := shell.cca("explain", svc).stdout) and t,
                "the down window to hold the count", timeout=20)
    assert "(scale_down window)" in text and "samples from gate" in text, text
    down = wait(lambda: (d := scaling())["desired"] == 1 and d, "the count back at 1", timeout=30)
    print(f"back to 1 {time.monotonic() - stopped:.1f}s after the load stopped")
    assert term(down)["sources"] == ["gate"] and term(down)["observed"] == 0, down
    events = json.loads(shell.cca("get", "events", "-o", "json").stdout)
    reasons = [e["reason"] for e in events if e.get("reason")]
    assert any(r.startswith("scaled 1 → 3: target requests_per_second recommends") for r in reasons), reasons
    assert any(r.startswith("scaled 3 → ") for r in reasons), reasons
