"""Service VIPs and network policy on `cca up --nodes 3` with runc, under each data plane (parity):
a client container reaches web's VIP and gets answers from backends on all three nodes; after a
scale-down no request reaches the stopped backend; and a policy matrix (`deny a -> web`, `allow c ->
web port 8080`) holds same node, cross node and through the VIP, as `cca explain connection` says —
again after a web instance moves to another node (`cca drain` of its node) and after the allow is
removed.

Clients are real containers (`cca exec`): the eBPF plane translates VIPs at connect() for sockets of
the node's own container cgroup, so a host process in a container's network namespace would not do."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time

import pytest

pytestmark = pytest.mark.e2e

#: busybox httpd answering with its own hostname (the instance name).
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
service a {{
    image busybox
    command "exec sleep 3600"
    instances 3
    placement {{ separate "a" }}
    resources {{ cpu 50m  memory 16Mi }}
}}
service c {{
    image busybox
    command "exec sleep 3600"
    instances 3
    placement {{ separate "c" }}
    resources {{ cpu 50m  memory 16Mi }}
}}
network {{
    deny default/a -> default/web
    allow default/c -> default/web port 8080
}}
"""
#: `get ADDRESS`: the answer's last line (the backend's hostname), nothing when refused or dropped
#: (busybox nc: its wget crashes in this image).
GET = "get() { printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 \"$1\" 8080 2>/dev/null | tail -n 1; }; "
#: One line per target: `<target> ok <answer>` or `<target> fail`.
PROBE = GET + ('for t in TARGETS; do out=$(get $t); if [ -n "$out" ]; '
               'then echo "$t ok $out"; else echo "$t fail"; fi; done')
#: `count` requests to the VIP, one answer (or `fail`) per line.
REPEAT = GET + 'for i in $(seq COUNT); do out=$(get VIP); echo "${out:-fail}"; done'


def _repeat(count: int, vip: str) -> str:
    return REPEAT.replace("COUNT", str(count)).replace("VIP", vip)



def _exec(shell, instance: str, script: str) -> subprocess.Popen:
    return subprocess.Popen([*_cca(), "exec", instance, "--", "sh", "-c", script], env=shell.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _cca() -> tuple[str, ...]:
    from tests.e2e.conftest import CCA

    return CCA


def _results(proc: subprocess.Popen, timeout: float = 90) -> dict[str, str]:
    out, err = proc.communicate(timeout=timeout)
    rows = {}
    for line in out.splitlines():
        target, _, rest = line.partition(" ")
        rows.setdefault(target, rest)
    assert rows, f"no output from the probe: {out}\n{err}"
    return rows


def _fact(shell, key: str) -> dict:
    """One document, read from the server's SQLite file read-only (the server owns the store)."""
    db = sqlite3.connect(f"file:{shell.home}/state.db?mode=ro", uri=True)
    try:
        row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else {}
    finally:
        db.close()


def _running(shell, service: str) -> list[dict]:
    return [i for i in shell.instances() if i["service"] in (service, f"default/{service}")
            and i["state"] == "running" and i.get("ip")]


def _matrix(shell, web: list[dict], a: list[dict], c: list[dict], vip: str, when: str) -> None:
    """Every instance of a and c to every web backend (same node, cross node) and to the VIP: c's
    pairs connect, a's fail (`deny a -> web`, `allow c -> web port 8080`)."""
    targets = " ".join([i["ip"] for i in web] + [vip])
    probes = {(svc, i["name"], i["node"]): _exec(shell, i["name"], PROBE.replace("TARGETS", targets))
              for svc, group in (("a", a), ("c", c)) for i in group}
    for (svc, name, node), proc in probes.items():
        rows = _results(proc)
        for backend in web:
            where = "same node" if backend["node"] == node else "cross node"
            verdict = rows.get(backend["ip"], "")
            if svc == "c":
                assert verdict.startswith("ok"), f"c {name} -> web {backend['ip']} ({where}){when}: {verdict}"
            else:
                assert verdict == "fail", \
                    f"a {name} -> web {backend['ip']} ({where}){when} got through: {verdict}"
        assert rows[vip].startswith("ok") == (svc == "c"), f"{svc} {name} -> VIP {vip}{when}: {rows[vip]}"


def _inspect_dataplane(shell, web: list[dict], c: list[dict], vip: str, dataplane: str) -> None:
    """`cca node-inspect NODE --dataplane`: the node's agent reads its kernel back — the VIP with
    all three backends, web's identity and addresses, the allowed tuple from c, hit counters."""
    node = c[0]["node"]
    report = json.loads(shell.cca("node-inspect", node, "--dataplane", "-o", "json").stdout)["dataplane"]
    assert report["plane"] == dataplane and report["error"] is None, report
    [entry] = [s for s in report["services"] if s.get("vip") == vip]
    assert sorted(b["ip"] for b in entry["backends"]) == sorted(i["ip"] for i in web)
    assert entry["hits"] > 0, entry  # c[0]'s requests above went through this node's VIP
    identities = {i["identity"]: set(i["addresses"]) for i in report["identities"]}
    assert identities["default/web"] == {i["ip"] for i in web}
    assert {i["ip"] for i in c} <= identities["default/c"]
    [policy] = [p for p in report["policies"] if p["identity"] == "default/web"]
    local = sorted(i["ip"] for i in web if i["node"] == node)
    if dataplane == "nftables":
        assert policy["local_addresses"] == local
    else:  # the BPF maps keep no locality: the ingress program sees only this node's sockets anyway
        assert set(policy["local_addresses"]) >= set(local)
    tuples = {(t["source"], t["port"], t["protocol"]) for t in policy["allowed"]}
    # `allow … port 8080` names no protocol: tcp and udp
    assert ("default/c", 8080, "any") in tuples and "default/a" not in {t[0] for t in tuples}, tuples
    assert policy["dropped"] > 0  # a's probes to this node's web instance
    table = shell.cca("node-inspect", node, "--dataplane").stdout
    assert f"data plane {dataplane}" in table and vip in table and "default/c" in table, table
    # explain connection --dataplane: the kernel's entries give the rules' verdict
    for svc, expected in (("a", "denied"), ("c", "allowed")):
        said = json.loads(shell.cca("explain", "connection", f"default/{svc}", "default/web:8080/tcp",
                                    "--dataplane", node, "-o", "json").stdout)
        kernel = said["dataplane"]
        assert kernel["verdict"] == expected and kernel["agrees"] and kernel["plane"] == dataplane, kernel
        assert bool(kernel["tuples"]) == (svc == "c"), kernel


@pytest.mark.parametrize("dataplane", ["nftables", "ebpf"])
def test_vip_balances_across_nodes_and_policy_matrix_holds(three_nodes, tmp_path, wait, dataplane) -> None:
    shell = three_nodes.shell
    nodes = {n["name"]: n for n in shell.get("nodes")}
    assert {n["value"].get("dataplane") for n in nodes.values()} == {dataplane}
    wide = shell.cca("get", "nodes", "-o", "wide").stdout
    assert "DATAPLANE" in wide.upper() and dataplane in wide, wide
    (tmp_path / "cluster.cca").write_text(CLUSTER)
    shell.cca("apply", str(tmp_path / "cluster.cca"), "--wait", "--timeout", "120", timeout=150)
    web, a, c = (wait(lambda s=s: len(r := _running(shell, s)) == 3 and r, f"3 {s}", timeout=60)
                 for s in ("web", "a", "c"))
    assert len({i["node"] for i in web}) == 3, f"web not on three nodes: {web}"
    vip = _fact(shell, "derived/vip/default/web")["ip"]

    # VIP: answers from the backends on all three nodes, from a client container
    names = {i["name"].rsplit("/", 1)[-1] for i in web}
    seen: set[str] = set()
    deadline = time.monotonic() + 40
    while seen != names and time.monotonic() < deadline:
        out = subprocess.run([*_cca(), "exec", c[0]["name"], "--", "sh", "-c",
                              _repeat(15, vip)],
                             env=shell.env, capture_output=True, text=True, timeout=90)
        seen |= set(out.stdout.split())
    assert seen == names, f"through {vip} only {seen} of {names} answered"

    # policy matrix: every client instance to every backend (same node and cross node) and the VIP
    _matrix(shell, web, a, c, vip, "")
    for svc, expected in (("a", "denied"), ("c", "allowed")):
        said = json.loads(shell.cca("explain", "connection", f"default/{svc}", "default/web:8080/tcp",
                                    "-o", "json").stdout)
        assert said["verdict"] == expected, said

    _inspect_dataplane(shell, web, c, vip, dataplane)

    # scale down: once the endpoint update is in, no request reaches the stopped backend
    smaller = CLUSTER.replace("instances 3\n    expose", "instances 2\n    expose")
    (tmp_path / "cluster.cca").write_text(smaller)
    shell.cca("apply", str(tmp_path / "cluster.cca"), "--wait", "--timeout", "90", timeout=120)
    left = wait(lambda: len(r := _running(shell, "web")) == 2 and r, "web down to 2", timeout=60)
    gone = names - {i["name"].rsplit("/", 1)[-1] for i in left}
    assert len(gone) == 1
    wait(lambda: len(_fact(shell, "derived/endpoint/default/web").get("endpoints", [])) == 2,
         "the endpoint update", timeout=30)
    time.sleep(2)  # the agents' next tick carries it into every node's kernel
    out = subprocess.run([*_cca(), "exec", c[1]["name"], "--", "sh", "-c", _repeat(20, vip)],
                         env=shell.env, capture_output=True, text=True, timeout=120)
    answers = out.stdout.split()
    assert answers and not (set(answers) & gone), f"the stopped backend {gone} answered: {answers}"
    assert set(answers) <= names - gone, answers

    # a guarded destination moves: drain the node of one web instance; it lands on the node that
    # had none (`separate "web"`), a and c instances move too; the matrix holds again once every
    # node's firewall document (and so its kernel) carries the new addresses
    moved = left[0]
    shell.cca("drain", moved["node"], "--wait", "--timeout", "90", timeout=120)

    def off(service: str, count: int) -> list[dict] | None:
        """`count` running, none on the drained node, each row's address (the agent's report) the
        one its address document names: a replacement may reuse a stopped instance's name, whose
        last report (running, old address) stands until the new node's agent reports it."""
        running = _running(shell, service)
        away = len(running) == count and moved["node"] not in {i["node"] for i in running}
        return running if away and all(
            _fact(shell, f"derived/network/ip/default/{i['name'].rsplit('/', 1)[-1]}").get("ip") == i["ip"]
            for i in running) else None

    left = wait(lambda: off("web", 2), "web off the drained node", timeout=60)
    a, c = (wait(lambda s=s: off(s, 3), f"3 {s} off the drained node", timeout=60) for s in ("a", "c"))
    assert len({i["node"] for i in left}) == 2 and moved["ip"] not in {i["ip"] for i in left}, left
    web_ips = {i["ip"] for i in left}

    def addresses(service: str) -> set[str]:
        return set(_fact(shell, f"derived/identity/default/{service}").get("addresses", []))

    def guarded_where_it_runs() -> bool:  # each web node's firewall guards its web address
        return all(i["ip"] in _fact(shell, f"derived/firewall/{i['node']}").get("policies", {})
                   .get("default/web", {}).get("local", []) for i in left)

    # what the kernels need, from the documents that carry it since 15413f1: the sources' and the
    # destination's addresses (identity documents), and each web node's guarded local address
    wait(lambda: addresses("web") == web_ips and addresses("c") == {i["ip"] for i in c}
         and guarded_where_it_runs(), "the identity and firewall documents with the new addresses",
         timeout=30)
    endpoints = "derived/endpoint/default/web"
    wait(lambda: {e["ip"] for e in _fact(shell, endpoints).get("endpoints", [])} == web_ips,
         "the endpoint update", timeout=30)
    time.sleep(2)  # the agents' next tick carries them into every node's kernel
    _matrix(shell, left, a, c, vip, f" after web moved off {moved['node']}")

    # a rule removed (re-applied without `allow c -> web`): web stays default-deny (the deny names
    # it), so c's pairs close too — same node, cross node and through the VIP — as explain says
    without = smaller.replace("    allow default/c -> default/web port 8080\n", "")
    assert without != smaller
    (tmp_path / "cluster.cca").write_text(without)
    shell.cca("apply", str(tmp_path / "cluster.cca"), "--wait", "--timeout", "90", timeout=120)

    def web_policy(node: str) -> dict:
        return _fact(shell, f"derived/firewall/{node}").get("policies", {}).get("default/web", {})

    wait(lambda: all((p := web_policy(i["node"])) and not p["allowed"] for i in left),
         "the firewall documents without c's tuple", timeout=30)
    time.sleep(2)  # the agents' next tick carries them into every node's kernel
    targets = " ".join([i["ip"] for i in left] + [vip])
    probes = {(svc, i["name"], i["node"]): _exec(shell, i["name"], PROBE.replace("TARGETS", targets))
              for svc, group in (("a", a), ("c", c)) for i in group}
    for (svc, name, node), proc in probes.items():
        rows = _results(proc)
        for backend in left:
            where = "same node" if backend["node"] == node else "cross node"
            assert rows.get(backend["ip"]) == "fail", f"{svc} {name} -> web {backend['ip']} ({where}) " \
                f"after the allow was removed: {rows.get(backend['ip'])}"
        assert rows[vip] == "fail", f"{svc} {name} -> VIP {vip} after the allow was removed: {rows[vip]}"
    said = json.loads(shell.cca("explain", "connection", "default/c", "default/web:8080/tcp",
                                "-o", "json").stdout)
    assert said["verdict"] == "denied", said
