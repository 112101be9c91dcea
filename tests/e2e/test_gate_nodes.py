"""A gate on `cca up --nodes 3`: every node's agent runs HAProxy on its own underlay address (the
gate's `listen` port), so the gate answers on all three nodes. Two host names route to the target
service's ready backends (on any node: HAProxy connects over the overlay); a request carrying the
sticky cookie HAProxy inserted is answered by the same backend every time; a host no gate names
gets the 404 of `gates_no_route`. Requests are made from the host, as a client outside does.
Stickiness holds across nodes: the cookie value is HAProxy's dynamic cookie (a hash of the
backend's address and port with a key from the gate's name), so every node gives a backend the
same value and a cookie from one node's gate is answered by the same backend through every other."""

from __future__ import annotations

import secrets

import pytest

from tests.e2e.netprobe import SERVE, http_get, running

pytestmark = pytest.mark.e2e

LISTEN = 18080  # the gate's port on each node address


@pytest.mark.parametrize("dataplane", ["nftables", "ebpf"])  # both planes, the same test
def test_gate_two_hosts_sticky_on_every_node(three_nodes, tmp_path, wait, dataplane) -> None:
    shell, tag = three_nodes.shell, secrets.token_hex(2)
    svc, cookie = f"gw{tag}", f"CCA_{tag}"
    hosts = (f"shop-{tag}.example.com", f"www.shop-{tag}.example.com")
    (tmp_path / "gate.cca").write_text(f"""
service {svc} {{
    image busybox
    command "{SERVE.format(port=8080)}"
    instances 3
    expose 8080
    placement {{ separate "{svc}" }}
    resources {{ cpu 50m  memory 16Mi }}
}}
gate g{tag} {{
    host "{hosts[0]}"
    host "{hosts[1]}"
    path /
    target {svc} port 8080
    sticky {{ cookie "{cookie}" }}
    listen {LISTEN}
}}
""")
    shell.cca("apply", str(tmp_path / "gate.cca"), "--wait", "--timeout", "120", timeout=150)
    backends = wait(lambda: len(r := running(shell, svc)) == 3 and r, f"3 {svc}", timeout=60)
    names = {i["name"].rsplit("/", 1)[-1] for i in backends}
    nodes = three_nodes.layout()["underlay"]["nodes"]

    def all_backends(address: str, host: str) -> dict[str, str] | None:
        """backend → its cookie, once every backend has answered through this node's gate."""
        cookies = {}
        for _ in range(30):
            try:
                status, headers, body = http_get(address, LISTEN, host=host, timeout=2)
            except OSError:
                return None  # HAProxy not (yet) listening there
            if status != 200:
                return None  # no ready server in its slots yet (503)
            assert body in names, f"{host} via {address} answered {body!r}, not one of {names}"
            set_cookie = headers.get("set-cookie", "")
            assert set_cookie.startswith(f"{cookie}="), f"no sticky cookie from {address}: {headers}"
            cookies[body] = set_cookie.split(";", 1)[0]
            if set(cookies) == names:
                return cookies
        return None

    mappings = {}
    for node, where in sorted(nodes.items()):
        address = where["address"]
        for host in hosts:
            cookies = wait(lambda a=address, h=host: all_backends(a, h),
                           f"every backend through {node}'s gate {address}:{LISTEN} for {host}", timeout=40)
            for backend, value in sorted(cookies.items()):
                again = {http_get(address, LISTEN, host=host, cookie=value)[2] for _ in range(6)}
                assert again == {backend}, f"{node} {host} cookie {value} went to {again}, not {backend}"
            print(f"\n{node} {address}:{LISTEN} {host}: {len(cookies)} backends, each sticky by cookie "
                  + ", ".join(f"{v}→{b}" for b, v in sorted(cookies.items())))
            mappings[node] = cookies
        status, _, body = http_get(address, LISTEN, host=f"other-{tag}.example.com")
        assert status == 404 and "no gate" in body, (node, status, body)
    # The same cookie names the same backend on every node, whatever slots each node filled.
    first, *others = sorted(mappings)
    for node in others:
        assert mappings[node] == mappings[first], f"{node} {mappings[node]} != {first} {mappings[first]}"
    for backend, value in sorted(mappings[first].items()):
        for node, where in sorted(nodes.items()):
            for host in hosts:
                got = http_get(where["address"], LISTEN, host=host, cookie=value)[2]
                assert got == backend, f"cookie {value} from {first} reached {got} via {node}, not {backend}"
