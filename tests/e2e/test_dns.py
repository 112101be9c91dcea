"""Cluster DNS on `cca up --nodes 3` with runc: a client container resolves `web.default.cca.local`
(and the short `web` through its search list) to web's VIP and reaches the backends through it by
name; a stateful ordinal's name resolves to that instance's address from every node; `cca describe
service` shows the name; a connection URL's `db.default` host resolves through the search list."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

pytestmark = pytest.mark.e2e

SERVE = "mkdir -p /w && hostname > /w/index.html && exec httpd -f -p 8080 -h /w"
CLUSTER = f"""
service web {{
    image busybox
    command "{SERVE}"
    instances 3
    expose 8080
    placement {{ separate "web" }}
    resources {{ cpu 50m  memory 16Mi }}
}}
service db {{
    image busybox
    command "exec sleep 3600"
    instances 2
    stateful
    resources {{ cpu 50m  memory 16Mi }}
}}
service c {{
    image busybox
    command "exec sleep 3600"
    instances 3
    placement {{ separate "c" }}
    resources {{ cpu 50m  memory 16Mi }}
}}
"""
#: One line per request to `web` by NAME: the answering backend's hostname, or `fail`.
BY_NAME = ('for i in $(seq 12); do out=$(printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 2 NAME 8080 '
           '2>/dev/null | tail -n 1); echo "${out:-fail}"; done')


def _cca() -> tuple[str, ...]:
    from tests.e2e.conftest import CCA

    return CCA


def _exec(shell, instance: str, script: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*_cca(), "exec", instance, "--", "sh", "-c", script], env=shell.env,
                          capture_output=True, text=True, timeout=timeout)


def _running(shell, service: str) -> list[dict]:
    return [i for i in shell.instances() if i["service"] in (service, f"default/{service}")
            and i["state"] == "running" and i.get("ip")]


def _addresses(nslookup_output: str) -> set[str]:
    """The answer's addresses in busybox nslookup output (after the server's own lines)."""
    answer = nslookup_output.split("Name:", 1)[-1] if "Name:" in nslookup_output else ""
    return set(re.findall(r"Address(?: \d+)?:\s*([0-9.]+)", answer))


@pytest.mark.parametrize("dataplane", ["nftables", "ebpf"])  # both planes, the same test
def test_containers_resolve_services_and_stateful_ordinals(three_nodes, tmp_path, wait, dataplane) -> None:
    shell = three_nodes.shell
    (tmp_path / "cluster.cca").write_text(CLUSTER)
    shell.cca("apply", str(tmp_path / "cluster.cca"), "--wait", "--timeout", "120", timeout=150)
    web, db, c = (wait(lambda s=s, n=n: len(r := _running(shell, s)) == n and r, f"{n} {s}", timeout=90)
                  for s, n in (("web", 3), ("db", 2), ("c", 3)))
    described = shell.cca("describe", "service", "web").stdout
    vip = re.search(r"VIP:\s+([0-9.]+)", described).group(1)
    assert re.search(r"DNS:\s+web\.default\.cca\.local", described), described
    client = c[0]["name"]

    # the service name and the short name (search list) answer the VIP, at once, from the node resolver
    for name in ("web.default.cca.local", "web"):
        out = _exec(shell, client, f"nslookup {name}")
        assert _addresses(out.stdout) == {vip}, (name, out.stdout, out.stderr)
    started = time.monotonic()
    aaaa = _exec(shell, client, "nslookup -type=AAAA web.default.cca.local")
    assert time.monotonic() - started < 5 and not _addresses(aaaa.stdout), aaaa.stdout

    # reached by name through the VIP: answers from the backends on all three nodes
    names = {i["name"].rsplit("/", 1)[-1] for i in web}
    seen: set[str] = set()
    deadline = time.monotonic() + 40
    while seen != names and time.monotonic() < deadline:
        seen |= set(_exec(shell, client, BY_NAME.replace("NAME", "web.default.cca.local")).stdout.split())
    assert seen == names, f"by name only {seen} of {names} answered"

    # each stateful ordinal's name is its instance's address, from a client on every node
    ordinals = {i["name"].rsplit("/", 1)[-1]: i["ip"] for i in db}
    assert set(ordinals) == {"db-0", "db-1"}
    for probe in c:
        for ordinal, ip in ordinals.items():
            out = _exec(shell, probe["name"], f"nslookup {ordinal}.db.default.cca.local")
            assert _addresses(out.stdout) == {ip}, (probe["node"], ordinal, out.stdout, out.stderr)
    # a name with dots through the search list (getaddrinfo, ndots:5; busybox nslookup searches only
    # dotless names): nc says which address it could not connect to (db runs nothing on port 9)
    short = _exec(shell, client, "nc -w 2 db-1.db 9 </dev/null")
    assert f"({ordinals['db-1']})" in short.stderr, short.stderr
    # a connection URL's host `db.default` (engine/api/connections.py) through the `cca.local` search
    # domain: db exposes nothing, so its name is headless (the ordinals' addresses)
    url_host = _exec(shell, client, "nc -w 2 db.default 9 </dev/null")
    assert any(f"({ip})" in url_host.stderr for ip in ordinals.values()), url_host.stderr
    missing = _exec(shell, client, "nslookup db-7.db.default.cca.local")
    assert not _addresses(missing.stdout) and missing.returncode != 0, missing.stdout
