"""Network policy in the kernel: a node network namespace with a bridge and three "instances"
(own network namespaces on veths), nftables table cca_pol_<bridge> programmed by PolicyTables.

Checks: allowed vs denied (dropped, counted), established flows pass, revoking an allow cuts a live
connection (conntrack), the gateway (host, node-local DNS) stays reachable, and `admit` puts a new
address under its identity's policy. Needs root, nft and conntrack; every name has a random suffix.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import time

import pytest

from ccattler.agent.dataplane.base import PolicyIngress
from ccattler.agent.dataplane.policy_nft import PolicyTables, render, run_command
from ccattler.agent.dataplane.policy_state import policy_state
from tests.agent.dataplane.flows import CLIENT, SERVER

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("conntrack"),
                                reason="needs root, nft and conntrack")

def sh(*argv, check=True):
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{argv}: {done.stderr.strip()}")
    return done


@pytest.fixture
def node():
    sfx = secrets.token_hex(3)
    ns = {role: f"np{role}{sfx}" for role in ("n", "d", "a", "x")}
    bridge = f"pb{sfx}"
    procs = []
    try:
        for name in ns.values():
            made = sh("ip", "netns", "add", name, check=False)
            if "No space left on device" in made.stderr:  # the host's mount table is full, not us
                pytest.skip(f"ip netns add: {made.stderr.strip()}")
            assert made.returncode == 0, made.stderr
        n = ns["n"]
        sh("ip", "-n", n, "link", "add", bridge, "type", "bridge")
        sh("ip", "-n", n, "addr", "add", "10.77.1.1/24", "dev", bridge)
        sh("ip", "-n", n, "link", "set", bridge, "up")
        sh("ip", "netns", "exec", n, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        for i, role in enumerate(("d", "a", "x"), start=2):
            host, peer = f"v{role}{sfx}", f"c{role}{sfx}"
            sh("ip", "-n", n, "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns[role])
            sh("ip", "-n", n, "link", "set", host, "master", bridge, "up")
            sh("ip", "-n", ns[role], "addr", "add", f"10.77.1.{i}/24", "dev", peer)
            sh("ip", "-n", ns[role], "link", "set", peer, "up")
            sh("ip", "-n", ns[role], "link", "set", "lo", "up")
            sh("ip", "-n", ns[role], "route", "add", "default", "via", "10.77.1.1")
        procs.append(subprocess.Popen(["ip", "netns", "exec", ns["d"], sys.executable, "-c", SERVER]))
        time.sleep(0.3)

        def run(argv, stdin=None):
            return run_command(["ip", "netns", "exec", n, *argv], stdin)

        tables = PolicyTables(bridge, "10.77.1.1", run=run)
        tables.ensure_bridge_filtering()
        yield ns, tables, procs
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for name in ns.values():
            sh("ip", "netns", "del", name, check=False)


def connects(ns: str, ip: str = "10.77.1.2") -> bool:
    probe = f"import socket; socket.create_connection(('{ip}', 5432), timeout=0.7).close()"
    return sh("ip", "netns", "exec", ns, sys.executable, "-c", probe, check=False).returncode == 0


def poke(client):
    client.stdin.write("\n")
    client.stdin.flush()


def state(allowed):
    identities = {"shop/db": frozenset({"10.77.1.2"}), "shop/api": frozenset({"10.77.1.3"}),
                  "shop/other": frozenset({"10.77.1.4"})}
    return identities, {"shop/db": PolicyIngress("shop/db", frozenset({"10.77.1.2"}), frozenset(allowed))}


def test_allowed_denied_established_and_revocation(node):
    ns, tables, procs = node
    assert connects(ns["a"]) and connects(ns["x"])  # no policy: open
    tables.apply(*state({("shop/api", 5432, "tcp")}))
    assert connects(ns["a"])
    assert not connects(ns["x"])  # dropped: timeout
    assert tables.counters()["shop/db"] >= 1
    client = subprocess.Popen(["ip", "netns", "exec", ns["a"], sys.executable, "-c", CLIENT, "10.77.1.2"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    procs.append(client)
    poke(client)
    assert client.stdout.readline().strip() == "ok"
    # an unrelated change (another identity allowed) keeps the established flow
    tables.apply(*state({("shop/api", 5432, "tcp"), ("shop/other", 80, "tcp")}))
    poke(client)
    assert client.stdout.readline().strip() == "ok"
    assert not connects(ns["x"])  # port 80 only
    # revoke api → db: the live connection is cut, not only new ones
    tables.apply(*state({("shop/other", 80, "tcp")}))
    poke(client)
    assert client.stdout.readline().strip() == "cut"
    assert not connects(ns["a"])
    assert tables.transactions == 3 and tables.replaced == 1  # later changes were deltas


def test_identity_relabel_changes_only_address_sets_and_gateway_is_reachable(node):
    ns, tables, _ = node
    identities, policies = state({("shop/api", 0, "any")})
    tables.apply(identities, policies)
    assert connects(ns["a"]) and not connects(ns["x"])
    identities = dict(identities) | {"shop/api": frozenset({"10.77.1.3", "10.77.1.4"})}
    tables.apply(identities, policies)  # other's address now also carries shop/api's identity
    assert connects(ns["x"])
    probe = "import socket; socket.create_connection(('10.77.1.2', 5432), timeout=0.7).close()"
    host = sh("ip", "netns", "exec", ns["n"], sys.executable, "-c", probe, check=False)
    assert host.returncode == 0  # the node itself (host, DNS on the gateway) is not policed


def test_admit_puts_a_new_address_under_policy_before_start(node):
    ns, tables, _ = node
    identities, _ = state(set())
    empty = PolicyIngress("shop/db", frozenset(), frozenset({("shop/api", 0, "any")}))
    tables.apply(identities, {"shop/db": empty})
    assert connects(ns["x"])  # 10.77.1.2 not yet known as shop/db: not policed
    tables.admit("shop/db", "10.77.1.2")
    assert not connects(ns["x"]) and connects(ns["a"])
    assert tables.transactions == 2 and tables.replaced == 1


def test_render_is_one_transaction_and_state_from_document():
    doc = {"node": "n1",
           "policies": {"b/y": {"local": ["10.0.0.2"], "named_by": ["r"],
                                "allowed": [{"from": "a/x", "port": 53, "protocol": "udp", "rule": "r"}]}}}
    identities, policies = policy_state(doc, {"a/x": {"addresses": ["10.0.0.1"]},
                                              "b/y": {"addresses": ["10.0.0.2", "10.0.0.3"]}})
    assert policies["b/y"] == PolicyIngress("b/y", frozenset({"10.0.0.2"}), frozenset({("a/x", 53, "udp")}))
    from ccattler.agent.dataplane.policy_nft import PolicySet, numbered

    state = PolicySet(identities, policies)
    script = render("cca_pol_br0", "10.0.0.254", state, numbered(state))
    assert script.startswith("table inet cca_pol_br0\ndelete table inet cca_pol_br0\n")
    # a/x is mark 1 (name order), its grant a set element; no rule names a tuple
    assert "add set inet cca_pol_br0 t_" in script and "elements = { 1 . udp . 53 }" in script
    assert "ip daddr vmap @guarded" in script and "10.0.0.1 : 1" in script
    assert policy_state(None) == ({}, {})


def test_grants_are_set_elements_through_libnftables_in_process(node):
    """The agent's path: libnftables in the calling thread's namespace (no `nft` process), and a
    grant or relabel adds elements — the rule count stays fixed however many tuples there are."""
    from ccattler.agent.dataplane import libnft
    from ccattler.agent.net import netns

    if libnft.library() is None:
        pytest.skip("no libnftables.so.1")

    ns, _, _ = node
    n = ns["n"]
    tables = PolicyTables(f"inproc{secrets.token_hex(2)}", "10.77.1.1")  # default runner: in-process
    identities = {f"t/s{i}": frozenset({f"10.78.{i // 250}.{i % 250 + 2}"}) for i in range(300)}
    identities["shop/db"] = frozenset({"10.77.1.2"})

    def rules() -> int:
        listed = sh("ip", "netns", "exec", n, "nft", "-a", "list", "table", "inet", tables.table).stdout
        return sum(1 for line in listed.splitlines() if "# handle" in line and "{" not in line)  # rules

    few = {"shop/db": PolicyIngress("shop/db", frozenset({"10.77.1.2"}), frozenset({("t/s0", 5432, "tcp")}))}
    netns.run_in(n, lambda: tables.apply(identities, few))
    fixed = rules()
    many = {"shop/db": PolicyIngress("shop/db", frozenset({"10.77.1.2"}),
                                     frozenset((f"t/s{i}", 5432, "tcp") for i in range(300)))}
    netns.run_in(n, lambda: tables.apply(identities, many))
    assert tables.replaced == 1 and tables.transactions == 2  # the second was a delta
    assert rules() == fixed, "300 grants added elements, not rules"
    netns.run_in(n, lambda: tables.teardown())


@pytest.fixture
def bare():
    """A network namespace only (no traffic): the policy table's read-back and repair."""
    from ccattler.agent.net import netns

    name = f"npr{secrets.token_hex(3)}"
    netns.create(name)
    try:
        def run(argv, stdin=None):
            return run_command(["ip", "netns", "exec", name, *argv], stdin)

        yield run
    finally:
        netns.remove(name)


def _policy(*allowed):
    identities = {"shop/db": frozenset({"10.77.1.2"}), "shop/api": frozenset({"10.77.1.3"}),
                  "shop/web": frozenset({"10.77.1.5", "10.77.1.6"})}
    return identities, {"shop/db": PolicyIngress("shop/db", frozenset({"10.77.1.2"}), frozenset(allowed))}


def test_restart_reads_the_table_back_and_repairs_only_the_difference(bare):
    run = bare
    bridge = f"rb{secrets.token_hex(2)}"
    first = PolicyTables(bridge, "10.77.1.1", run=run)
    wanted = _policy(("shop/api", 5432, "tcp"), ("shop/web", 0, "any"), ("shop/web", 80, "any"),
                     ("shop/api", 0, "udp"))
    first.apply(*wanted)
    found = first.programmed()
    assert found is not None and dict(found.state.policies) == wanted[1]
    assert {k: v for k, v in found.state.identities.items() if v} == wanted[0]
    assert dict(found.numbers) == first.numbers

    again = PolicyTables(bridge, "10.77.1.1", run=run)  # a restarted agent, same kernel
    again.apply(*wanted)
    assert again.transactions == 0 and again.replaced == 0 and again.numbers == first.numbers

    # drift while the agent is down: a grant element removed, a stray address numbered
    h = hashlib.sha256(b"shop/db").hexdigest()[:16]
    api = first.numbers["shop/api"]
    run(["nft", "-f", "-"], f"delete element inet {first.table} t_{h} {{ {api} . tcp . 5432 }}\n"
                            f"add element inet {first.table} ipcache {{ 10.77.1.9 : {api} }}\n")
    repaired = PolicyTables(bridge, "10.77.1.1", run=run)
    repaired.apply(*wanted)
    assert repaired.transactions == 1 and repaired.replaced == 0  # a repair, not a new table
    assert dict(repaired.programmed().state.policies) == wanted[1]
    assert "10.77.1.9" not in repaired.programmed().state.identities["shop/api"]

    # a new source identity gets the next number; the others keep theirs
    grown = (dict(wanted[0]) | {"shop/new": frozenset({"10.77.1.7"})},
             {"shop/db": PolicyIngress("shop/db", frozenset({"10.77.1.2"}),
                                       wanted[1]["shop/db"].allowed | {("shop/new", 22, "tcp")})})
    repaired.apply(*grown)
    assert repaired.replaced == 0 and repaired.numbers["shop/new"] == max(first.numbers.values()) + 1
    assert {k: v for k, v in repaired.numbers.items() if k != "shop/new"} == first.numbers
    repaired.teardown()


def test_another_layout_or_a_hand_edited_chain_is_replaced(bare):
    run = bare
    bridge = f"rb{secrets.token_hex(2)}"
    table = f"cca_pol_{bridge}"
    run(["nft", "-f", "-"], f"table inet {table} {{ set i_0123 {{ type ipv4_addr; }}; }}\n")  # the old layout
    tables = PolicyTables(bridge, "10.77.1.1", run=run)
    assert tables.programmed() is None
    tables.apply(*_policy(("shop/api", 5432, "tcp")))
    assert tables.replaced == 1 and "i_0123" not in run(["nft", "list", "table", "inet", table])

    h = hashlib.sha256(b"shop/db").hexdigest()[:16]
    run(["nft", "-f", "-"], f"insert rule inet {table} d_{h} accept\n")  # opens the destination
    restarted = PolicyTables(bridge, "10.77.1.1", run=run)
    assert restarted.programmed() is None
    restarted.apply(*_policy(("shop/api", 5432, "tcp")))
    assert restarted.replaced == 1 and restarted.programmed() is not None
    assert PolicyTables(bridge, "10.77.1.2", run=run).programmed() is None  # another gateway rule
    restarted.teardown()


def test_only_a_change_that_takes_something_away_lists_conntrack():
    """A grant cannot end an allowed flow, so it costs one nft transaction and no conntrack
    process; a revocation or an address leaving an allowed identity lists the destination's flows."""
    from ccattler.agent.dataplane.policy_nft import PolicyError

    calls = []

    def run(argv, stdin=None):
        calls.append(list(argv[:2]))
        if argv[:2] == ["nft", "list"]:
            raise PolicyError("no table")  # nothing programmed yet: the first apply replaces
        return ""

    tables = PolicyTables("br0", "10.77.1.1", run=run)
    tables.apply(*_policy(("shop/api", 5432, "tcp")))
    calls.clear()
    tables.apply(*_policy(("shop/api", 5432, "tcp"), ("shop/web", 80, "tcp")))  # a grant
    assert calls == [["nft", "-f"]]
    calls.clear()
    identities, policies = _policy(("shop/api", 5432, "tcp"), ("shop/web", 80, "tcp"))
    tables.apply(identities | {"shop/web": frozenset({"10.77.1.5"})}, policies)  # 10.77.1.6 left web
    assert calls == [["nft", "-f"], ["conntrack", "-L"]]
    calls.clear()
    tables.apply(identities | {"shop/web": frozenset({"10.77.1.5"})},
                 _policy(("shop/web", 80, "tcp"))[1])  # api revoked
    assert calls == [["nft", "-f"], ["conntrack", "-L"]]


def test_tuple_counters_count_admitted_connections_per_tuple(node):
    """Element counters of the t_/p_/s_ sets (`cca node-inspect --dataplane`'s allowed hits): a
    tuple allowed for any protocol sums its tcp and udp elements, any-port tuples are counted too,
    and a table whose sets have no counters (made before they had) reports no tuple at all."""
    ns, tables, _ = node
    allowed = {("shop/api", 5432, "any"), ("shop/other", 0, "tcp")}
    tables.apply(*state(allowed))
    assert connects(ns["a"]) and connects(ns["a"]) and connects(ns["x"])
    counted = tables.tuple_counters()
    assert counted == {("shop/db", "shop/api", 5432, "any"): 2, ("shop/db", "shop/other", 0, "tcp"): 1}
    assert tables.programmed().state.policies["shop/db"].allowed == allowed  # the reader ignores counters
    # the same layout without counters (an older table): read back as before, no tuple counted
    script = render(tables.table, tables.gateway, tables.state, tables.numbers).replace(" counter;", "")
    tables._run(["nft", "-f", "-"], script)
    assert tables.programmed().state.policies["shop/db"].allowed == allowed
    assert tables.tuple_counters() == {}


def test_a_relabel_cutting_many_destinations_lists_conntrack_once():
    """An address leaving a source allowed by several local destinations: one `conntrack -L` for
    all of them (not a process per address), and only the flows the new policy refuses deleted."""
    from ccattler.agent.dataplane.policy_nft import PolicyError

    calls = []
    flows = ("tcp      6 431999 ESTABLISHED src=10.77.1.6 dst=10.77.1.2 sport=40000 dport=80 "
             "src=10.77.1.2 dst=10.77.1.6 sport=80 dport=40000 [ASSURED] mark=0 use=1\n"
             "tcp      6 431999 ESTABLISHED src=10.77.1.6 dst=10.77.1.7 sport=40001 dport=80 "
             "src=10.77.1.7 dst=10.77.1.6 sport=80 dport=40001 [ASSURED] mark=0 use=1\n"
             "tcp      6 431999 ESTABLISHED src=10.77.1.3 dst=10.77.1.7 sport=40002 dport=80 "
             "src=10.77.1.7 dst=10.77.1.3 sport=80 dport=40002 [ASSURED] mark=0 use=1\n")

    def run(argv, stdin=None):
        calls.append(list(argv))
        if argv[:2] == ["nft", "list"]:
            raise PolicyError("no table")
        return flows if argv[:2] == ["conntrack", "-L"] else ""

    allowed = frozenset({("shop/web", 80, "tcp"), ("shop/api", 80, "tcp")})
    identities = {"shop/db": frozenset({"10.77.1.2"}), "shop/cache": frozenset({"10.77.1.7"}),
                  "shop/api": frozenset({"10.77.1.3"}), "shop/web": frozenset({"10.77.1.5", "10.77.1.6"})}
    policies = {d: PolicyIngress(d, identities[d], allowed) for d in ("shop/db", "shop/cache")}
    tables = PolicyTables("br0", "10.77.1.1", run=run)
    tables.apply(identities, policies)
    calls.clear()
    tables.apply(identities | {"shop/web": frozenset({"10.77.1.5"})}, policies)  # 10.77.1.6 left web
    listings = [c for c in calls if c[:2] == ["conntrack", "-L"]]
    assert listings == [["conntrack", "-L"]]
    deleted = sorted(c[c.index("-d") + 1] for c in calls if c[:2] == ["conntrack", "-D"])
    assert deleted == ["10.77.1.2", "10.77.1.7"]  # .6's flows to both; api's flow to cache stays
