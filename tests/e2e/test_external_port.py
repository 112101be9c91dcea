"""`expose PORT external tcp` on `cca up --nodes 3` (nftables data plane): the service answers on
every node's underlay address at that port, from the host (outside the cluster, as a client on
the machines' network is), by a ready backend — local or on another node (DNAT, masqueraded when
the backend is remote so its answer comes back through the node that took the connection). Two
backends on three nodes: at least one node has none of its own."""

from __future__ import annotations

import secrets

import pytest

from tests.e2e.netprobe import SERVE, http_get, running

pytestmark = pytest.mark.e2e

PORT = 18443  # the external port (and the backends' own port)


@pytest.mark.parametrize("dataplane", ["nftables", "ebpf"])  # both planes, the same test
def test_external_port_answers_on_every_node_address(three_nodes, tmp_path, wait, dataplane) -> None:
    shell = three_nodes.shell
    svc = f"ext{secrets.token_hex(2)}"
    (tmp_path / "ext.cca").write_text(f"""
service {svc} {{
    image busybox
    command "{SERVE.format(port=PORT)}"
    instances 2
    expose {PORT} external tcp
    placement {{ separate "{svc}" }}
    resources {{ cpu 50m  memory 16Mi }}
}}
""")
    shell.cca("apply", str(tmp_path / "ext.cca"), "--wait", "--timeout", "120", timeout=150)
    backends = wait(lambda: len(r := running(shell, svc)) == 2 and r, f"2 {svc}", timeout=60)
    names = {i["name"].rsplit("/", 1)[-1]: i["node"] for i in backends}
    nodes = three_nodes.layout()["underlay"]["nodes"]
    assert len(set(names.values())) == 2, f"both backends on one node: {backends}"

    def answers(address: str) -> set[str]:
        seen = set()
        for _ in range(12):
            try:
                status, _, body = http_get(address, PORT, timeout=2)
            except OSError:
                return set()  # not (yet) in that node's kernel
            assert status == 200, (address, status, body)
            seen.add(body)
        return seen

    for node, where in sorted(nodes.items()):
        local = sorted(n for n, on in names.items() if on == node)
        seen = wait(lambda a=where["address"]: answers(a), f"{svc} on {node}'s {where['address']}:{PORT}",
                    timeout=30)
        assert seen <= set(names), f"{node} {where['address']}:{PORT} answered {seen}, not one of {names}"
        print(f"\n{node} {where['address']}:{PORT} (local: {local or 'none'}): answered by {sorted(seen)}")
