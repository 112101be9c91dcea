"""A real HAProxy (Debian's) driven by `Gates` on loopback: python HTTP servers on 127.0.0.x as
backends, the gate on a free port of 127.0.0.1. Host and path routing, a sticky cookie, an
endpoint change through the runtime API under an established keep-alive connection, and two
nodes' HAProxies that hold the backends in different slots giving one backend the same cookie."""

from __future__ import annotations

import http.client
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ccattler.agent.gates.manager import Gates
from ccattler.agent.gates.stats import backend_request_totals

pytestmark = pytest.mark.skipif(shutil.which("haproxy") is None, reason="HAProxy is not installed")


class _Named(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def do_GET(self) -> None:
        body = f"{self.server.name} {self.path}".encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None: ...


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def backends() -> Iterator[tuple[int, int]]:
    """web-a on 127.0.0.2, web-b on 127.0.0.3, web-c on 127.0.0.5 (one port), api-a on 127.0.0.4
    (another)."""
    web, api = _free_port(), _free_port()
    servers = []
    for name, address, port in (("web-a", "127.0.0.2", web), ("web-b", "127.0.0.3", web),
                                ("web-c", "127.0.0.5", web), ("api-a", "127.0.0.4", api)):
        server = ThreadingHTTPServer((address, port), _Named)
        server.name = name  # type: ignore[attr-defined]
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield web, api
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


@pytest.fixture
def gates(tmp_path: Path) -> Iterator[Gates]:
    gates = Gates("n1", tmp_path)
    try:
        yield gates
    finally:
        gates.stop()


def slice_of(listen: int, web: int, api: int, web_endpoints: dict[str, str]) -> dict:
    def endpoints(pairs: dict[str, str]) -> dict:
        return {"endpoints": [{"instance": i, "node": "n1", "ip": ip} for i, ip in pairs.items()]}

    return {"observed/node/n1": {"address": "127.0.0.1"},
            "desired/gate/default/shop": {"hosts": ["shop.example.com", "www.example.com"], "path": "/",
                                          "target": "default/web", "port": web, "listen": listen,
                                          "sticky": {"cookie": "SRV", "http_only": True, "same_site": "lax"}},
            "desired/gate/default/api": {"hosts": ["shop.example.com"], "path": "/api",
                                         "target": "default/api", "port": api, "listen": listen,
                                         "sticky": None},
            "derived/endpoint/default/web": endpoints(web_endpoints),
            "derived/endpoint/default/api": endpoints({"api-a": "127.0.0.4"})}


def get(conn: http.client.HTTPConnection, host: str, path: str = "/", cookie: str | None = None):
    conn.request("GET", path, headers={"Host": host, **({"Cookie": cookie} if cookie else {})})
    response = conn.getresponse()
    return response.status, response.read().decode(), response.getheader("Set-Cookie")


BOTH = {"web-a": "127.0.0.2", "web-b": "127.0.0.3"}


def test_host_and_path_routing_and_a_sticky_cookie(gates, backends):
    listen = _free_port()
    gates.sync(slice_of(listen, *backends, BOTH))
    conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=5)
    seen = {get(conn, "www.example.com:8000", "/x")[1].split()[0] for _ in range(6)}
    assert seen == {"web-a", "web-b"}  # both hosts' names, port in Host ignored, round robin
    assert get(conn, "SHOP.example.com")[1].startswith("web-")
    assert get(conn, "shop.example.com", "/api/v1")[1] == "api-a /api/v1"
    assert get(conn, "shop.example.com", "/apix")[1].startswith("web-")  # a whole path segment only
    assert get(conn, "other.example.com")[0] == 404
    status, body, cookie = get(conn, "shop.example.com")
    assert status == 200 and cookie and re.match(r"SRV=[0-9a-f]{16};", cookie) and "HttpOnly" in cookie
    pinned = cookie.split(";")[0]
    assert {get(conn, "shop.example.com", cookie=pinned)[1] for _ in range(6)} == {body}
    conn.close()


def test_a_backend_change_keeps_an_established_keep_alive_connection(gates, backends):
    listen = _free_port()
    gates.sync(slice_of(listen, *backends, {"web-a": "127.0.0.2"}))
    conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=5)
    assert get(conn, "shop.example.com")[1] == "web-a /"
    established = conn.sock
    gates.sync(slice_of(listen, *backends, {"web-b": "127.0.0.3"}))  # web-a replaced by web-b
    assert (gates.reloads, gates.runtime_changes) == (1, 1)
    assert get(conn, "shop.example.com")[1] == "web-b /"
    gates.sync(slice_of(listen, *backends, BOTH))
    assert {get(conn, "shop.example.com")[1] for _ in range(4)} == {"web-a /", "web-b /"}
    assert conn.sock is established and gates.reloads == 1  # the same client connection throughout
    conn.close()
    pid = gates.process.master_pid()
    assert pid is not None
    gates.stop()
    assert gates.process.master_pid() is None and not gates.process.dir.exists()
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]


def test_a_reload_keeps_serving(gates, backends):
    listen = _free_port()
    gates.sync(slice_of(listen, *backends, BOTH))
    facts = slice_of(listen, *backends, BOTH)
    facts["desired/gate/default/shop"]["hosts"].append("shop.example.org")
    gates.sync(facts)
    assert gates.reloads == 2
    conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=5)
    assert get(conn, "shop.example.org")[1].startswith("web-")
    conn.close()


def test_request_rates_come_from_haproxys_counters(gates, backends):
    listen = _free_port()
    gates.sync(slice_of(listen, *backends, BOTH))
    assert gates.request_rates(100.0) == {}  # one sample: no rate yet
    conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=5)
    for _ in range(8):
        get(conn, "shop.example.com")
    for _ in range(2):
        get(conn, "shop.example.com", "/api")
    conn.close()
    # HAProxy counts a keep-alive transaction when it ends, which may be just after its response
    # reached us: read the rate once every request is counted (failed once in CI under load).
    deadline = time.monotonic() + 5
    while sum(backend_request_totals(gates.api).values()) < 10 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gates.request_rates(102.0) == {"default/web": 4.0, "default/api": 1.0}
    assert gates.request_rates(104.0) == {"default/web": 0.0, "default/api": 0.0}


def test_one_cookie_picks_the_same_backend_on_every_node(tmp_path, backends):
    """Node 1 fills its slots a, b (then c through the runtime API), node 2 c first, then b, a:
    different slots, the same cookie per backend. A cookie whose backend is gone on a node falls
    back to another backend there and is re-stuck to it (a new Set-Cookie), which node 1 honours."""
    web, api = backends
    one, two = Gates("n1", tmp_path / "n1"), Gates("n1", tmp_path / "n2")
    try:
        ports = _free_port(), _free_port()
        one.sync(slice_of(ports[0], web, api, BOTH))
        two.sync(slice_of(ports[1], web, api, {"web-c": "127.0.0.5"}))
        one.sync(slice_of(ports[0], web, api, {**BOTH, "web-c": "127.0.0.5"}))
        two.sync(slice_of(ports[1], web, api, {"web-c": "127.0.0.5", "web-b": "127.0.0.3"}))
        two.sync(slice_of(ports[1], web, api, {"web-c": "127.0.0.5", "web-b": "127.0.0.3",
                                               "web-a": "127.0.0.2"}))
        assert one.runtime_changes == 1 and two.runtime_changes == 2
        assert one._slots["g_default__shop"].taken != two._slots["g_default__shop"].taken
        nodes = [http.client.HTTPConnection("127.0.0.1", port, timeout=5) for port in ports]

        def cookies(conn: http.client.HTTPConnection) -> dict[str, str]:
            found = {}
            for _ in range(6):
                _, body, set_cookie = get(conn, "shop.example.com")
                found[body.split()[0]] = set_cookie.split(";")[0]
            return found

        first, second = cookies(nodes[0]), cookies(nodes[1])
        assert set(first) == {"web-a", "web-b", "web-c"} and first == second
        for backend, value in first.items():
            for conn in nodes:
                assert {get(conn, "shop.example.com", cookie=value)[1] for _ in range(3)} == {f"{backend} /"}
        two.sync(slice_of(ports[1], web, api, {"web-a": "127.0.0.2", "web-b": "127.0.0.3"}))  # c gone there
        status, body, restuck = get(nodes[1], "shop.example.com", cookie=first["web-c"])
        assert status == 200 and body.split()[0] in {"web-a", "web-b"}
        assert restuck and restuck.split(";")[0] == first[body.split()[0]]
        assert get(nodes[0], "shop.example.com", cookie=restuck.split(";")[0])[1] == body
        for conn in nodes:
            conn.close()
    finally:
        one.stop()
        two.stop()
