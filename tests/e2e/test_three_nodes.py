"""`cca up --nodes 3`: containers on different nodes reach each other over the VXLAN overlay by
address (ping and TCP), the receiver sees the sender's own container address (no masquerade
inside the cluster), and `cca down` leaves nothing behind (checked by the fixture)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

SERVICE = """
service pong {
    image busybox
    command "exec httpd -f -p 8080 -h /"
    instances 3
    expose 8080
    resources { cpu 100m  memory 32Mi }
}
"""
#: A one-shot TCP server printing the peer address of the first connection it accepts.
PEER = ("import socket; s = socket.create_server(('0.0.0.0', 7000)); print('listening', flush=True); "
        "c, a = s.accept(); c.sendall(b'hi'); print(a[0], flush=True)")
HTTP = ("import http.client, sys; c = http.client.HTTPConnection(sys.argv[1], 8080, timeout=5); "
        "c.request('GET', '/'); print(c.getresponse().status)")
CONNECT = "import socket, sys; print(socket.create_connection((sys.argv[1], 7000), timeout=5).recv(2))"


@pytest.mark.parametrize("dataplane", ["nftables", "ebpf"])  # both planes, the same test
def test_containers_on_different_nodes_reach_each_other(three_nodes, tmp_path, wait, dataplane) -> None:
    shell = three_nodes.shell
    (tmp_path / "pong.cca").write_text(SERVICE)
    shell.cca("apply", str(tmp_path / "pong.cca"), "--wait", "--timeout", "90", timeout=120)
    instances = [i for i in shell.instances() if i["state"] == "running"]
    by_node = {i["node"]: i for i in instances}
    assert len(by_node) >= 2, f"instances all on one node: {instances}"
    (a, b), *_ = [(x, y) for x in by_node.values() for y in by_node.values() if x["node"] != y["node"]]

    ping = three_nodes.run_in(a, "ping", "-c", "2", "-W", "2", b["ip"])
    assert ping.returncode == 0, ping.stdout + ping.stderr
    server = subprocess.Popen(["ip", "netns", "exec", three_nodes.netns_of(b), sys.executable, "-c", PEER],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        client = three_nodes.run_in(a, sys.executable, "-c", CONNECT, b["ip"])
        assert client.returncode == 0 and "b'hi'" in client.stdout, client.stdout + client.stderr
        assert server.stdout.readline().strip() == a["ip"]  # the source address survived the crossing
    finally:
        server.kill()
        server.wait()
    # and the runc container's own httpd on the other node answers over the overlay
    get = three_nodes.run_in(a, sys.executable, "-c", HTTP, b["ip"])
    assert get.returncode == 0 and get.stdout.split()[0] in ("200", "403", "404"), get.stdout + get.stderr
