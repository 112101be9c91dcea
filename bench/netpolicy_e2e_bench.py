"""Network policy end to end: a change written in the store → held by the kernel of every node it
concerns (issue 15 part 6: p99 ≤ 1 s at 10,000 services × 10 rules).

    .venv/bin/python -u bench/netpolicy_e2e_bench.py [--services 10000] [--rules 10] [--real 4]
        [--changes 30] [--warmup 2]

Needs root, nft, libnftables and ip (runc is only looked up: no container runs). In this process: a
real `ApiServer` on a SQLite store and a real `Runner` running the network-policy controller alone
(the other controllers are left out: the script writes the documents they would — services, rules,
`derived/network/ip/` addresses, node subnets). The world is bench/netpolicy_bench.py's: N services
in 100 tenants, R allow rules each (every service default-deny, ~R + 100 allowed tuples), one
instance per service on 100 nodes (`n<i mod 100>`). Nodes `n0` … `n<real-1>` are real agents:
each its own process (`agent` below) in a scratch network namespace joined to this one by a veth,
an `AgentLoop` + `NodeCore` with the runc runtime and the nftables plane, talking mutual TLS to the
server; the other nodes' firewall documents are written by the controller (its cost is in the
figures) but applied by no kernel. Every change is chosen to concern the real nodes:

- `add`: an allow rule from a service not yet allowed to a destination on a real node;
- `remove`: the rule the previous `add` wrote, deleted;
- `move`: an instance of a destination on real node a moves to real node b with a new address
  (its identity's address set changes on every real node whose document names it; it becomes
  guarded on b and leaves a's local set).

After a random pause of 0–1 s (so a change lands anywhere in the agents' tick) the change is written
with `store.txn`; the clock runs from before that write until every concerned node's plane `apply`
carrying it has returned (its nft transaction committed; `perf_counter` is CLOCK_MONOTONIC, one
clock for all processes). The first `--warmup` changes are reported apart (the controller's
first partial solve after its whole one is a once-per-start cost). Every 5th change is also read
back from each concerned kernel (`PolicyTables.programmed()`), untimed. Prints JSON: p50/p99/max
by kind and overall, and per change where the time went (store → the agent receiving the last
document carrying it — its firewall document, or for a move the identity's `derived/identity/`
document — which includes the controller's solve; then the agent's sync and nft transaction).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from netpolicy_bench import world  # noqa: E402  (the same world as the controller benchmark)
from nft_vip_bench import pct  # noqa: E402
from watch_kernel_bench import Watcher  # noqa: E402  (the plane's applies, timed)

WORLD_NODES = 100
FIREWALL = "derived/firewall/"
IDENTITY = "derived/identity/"  # identity → addresses, one document each (every node reads them)


def holds(state, preds) -> bool:  # noqa: ANN001
    """Whether a data-plane state (or the kernel's `PolicySet`) satisfies every predicate."""
    for pred in preds:
        kind = pred[0]
        if kind == "tuple":  # [tuple, dest, src, port, proto, present]
            _, dest, src, port, proto, present = pred
            entry = state.policies.get(dest)
            if (entry is not None and (src, port, proto) in entry.allowed) != present:
                return False
        elif kind == "addr":  # [addr, identity, [ips]]
            if state.identities.get(pred[1]) != frozenset(pred[2]):
                return False
        elif kind == "local":  # [local, identity, ip, present]
            entry = state.policies.get(pred[1])
            if (entry is not None and pred[2] in entry.local_ips) != pred[3]:
                return False
    return True


# -- one real node (run as `ip netns exec NS python this agent …`) ------------------------------

def agent(args: argparse.Namespace) -> None:
    from ccattler.agent.images.store import ImageStore
    from ccattler.agent.loop import AgentLoop
    from ccattler.agent.machine import node_document
    from ccattler.agent.node import NodeCore
    from ccattler.agent.runtime.runc import RuncRuntime
    from ccattler.engine.api.agent_client import AgentClient
    from ccattler.engine.api.client import Client
    from ccattler.engine.clientconfig import Context

    state = Path(args.state)
    runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc", cgroup_parent=args.cgroup)
    core = NodeCore(args.node, runtime, state_dir=state, bridge=args.bridge, dataplane="nftables",
                    dns_port=None)
    watcher = Watcher()
    make = core._make_dataplane

    def make_and_wrap():  # noqa: ANN202
        plane = make()
        watcher.wrap(plane)
        return plane

    core._make_dataplane = make_and_wrap
    context = Context(name=args.node, server=args.server, ca=args.ca, cert=args.cert, key=args.key)
    client = Client(context, timeout=30)
    loop = AgentLoop(AgentClient(client), core, node_document(address=args.address), ttl=30, tick=1.0)
    watcher.follow(loop, core)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    started = time.perf_counter()
    thread.start()
    try:
        done = watcher.wait(started, lambda s: len(s.policies) > 0, timeout=600)
        print(json.dumps({"ready": done, "cold_s": round(done - started, 2),
                          "cold_apply_s": round(watcher.kernel_s[0], 3)}), flush=True)
        for line in sys.stdin:
            query = json.loads(line)
            since = query["since"]
            done = watcher.wait(since, lambda s, p=query["preds"]: holds(s, p), timeout=120)
            # the last of the documents carrying the change to arrive (a move: the identity's
            # addresses, and this node's firewall where it guards or stops guarding it)
            times = [t for k in [FIREWALL + args.node, *query.get("identities", ())]
                     if (t := watcher.arrived.get(k)) is not None and t >= since]
            arrived = max(times, default=None)
            index = next(i for i, (t, _) in enumerate(watcher.applied) if t == done)
            began = max((x for x in watcher.sync_starts if x <= done), default=None)
            answer = {"done": done, "arrived": arrived,
                      "sync_start": began, "apply_ms": round(1000 * watcher.kernel_s[index], 1)}
            if query.get("verify"):
                answer["kernel"] = holds(core.dataplane.policy.programmed().state, query["preds"])
            print(json.dumps(answer), flush=True)
    finally:
        stop.set()
        thread.join(15)
        core.shutdown(remove=True)
        client.close()


# -- the driver ------------------------------------------------------------------------------------

class Agents:
    """The real nodes: a netns + veth + agent process each; `close()` removes all of it."""

    def __init__(self, count: int) -> None:
        self.tag = secrets.token_hex(2)
        self.ns = [f"npe{self.tag}{k}" for k in range(count)]
        self.host_if = [f"npeh{self.tag}{k}" for k in range(count)]
        self.cgroups = [f"ccanpe{self.tag}{k}" for k in range(count)]
        self.procs: list[subprocess.Popen] = []

    @staticmethod
    def host_ip(k: int) -> str:
        return f"10.201.{k}.1"

    def network(self) -> None:
        from ccattler.agent.net import netns

        for k, ns in enumerate(self.ns):
            netns.create(ns)
            peer = f"npen{self.tag}{k}"
            for cmd in (["ip", "link", "add", self.host_if[k], "type", "veth", "peer", "name", peer],
                        ["ip", "link", "set", peer, "netns", ns],
                        ["ip", "addr", "add", f"{self.host_ip(k)}/30", "dev", self.host_if[k]],
                        ["ip", "link", "set", self.host_if[k], "up"],
                        ["ip", "-n", ns, "addr", "add", f"10.201.{k}.2/30", "dev", peer],
                        ["ip", "-n", ns, "link", "set", peer, "up"],
                        ["ip", "-n", ns, "link", "set", "lo", "up"]):
                subprocess.run(cmd, check=True, capture_output=True)

    def start(self, tmp: Path, port: int, ca: str) -> list[dict]:
        for k, ns in enumerate(self.ns):
            node = f"n{k}"
            self.procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, "-u", __file__, "agent", "--node", node,
                 "--server", f"{self.host_ip(k)}:{port}", "--ca", ca, "--cert", str(tmp / f"{node}.crt"),
                 "--key", str(tmp / f"{node}.key"), "--state", str(tmp / f"state-{node}"),
                 "--bridge", f"npb{self.tag}{k}", "--cgroup", self.cgroups[k], "--address", f"10.201.{k}.2"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                stderr=(tmp / f"agent-{node}.log").open("w")))
        return [json.loads(p.stdout.readline()) for p in self.procs]

    def ask(self, queries: dict[int, dict]) -> dict[int, dict]:
        for k, query in queries.items():
            self.procs[k].stdin.write(json.dumps(query) + "\n")
            self.procs[k].stdin.flush()
        answers = {}
        for k in queries:
            line = self.procs[k].stdout.readline()
            if not line:
                raise RuntimeError(f"agent n{k} ended (see its log)")
            answers[k] = json.loads(line)
        return answers

    def close(self) -> None:
        from ccattler.agent.net import netns

        for proc in self.procs:
            try:
                proc.stdin.close()
            except OSError:
                pass
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for k, ns in enumerate(self.ns):
            subprocess.run(["ip", "link", "del", self.host_if[k]], capture_output=True)
            try:
                netns.remove(ns)
            except Exception:  # noqa: BLE001 (cleanup: carry on with the rest)
                pass
            path = Path("/sys/fs/cgroup") / self.cgroups[k]
            if path.is_dir():
                subprocess.run(["rmdir", str(path)], check=False)


def wait_docs(store, nodes: list[str], timeout: float = 900) -> dict[str, dict]:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        docs = {n: store.get(FIREWALL + n) for n in nodes}
        if all(d is not None for d in docs.values()):
            return {n: d.value for n, d in docs.items()}
        time.sleep(0.2)
    raise TimeoutError("the controller wrote no firewall documents")


def sources(doc: dict, identity: str) -> bool:
    return any(t["from"] == identity for p in doc["policies"].values() for t in p["allowed"])


def driver(args: argparse.Namespace) -> dict:
    from ccattler.engine.api.server import ApiServer, ServerOptions
    from ccattler.engine.netpolicy.controller import NetpolicyController
    from ccattler.engine.pki import NODE_LIFETIME, cert_pem, init_cluster, key_pem, new_key
    from ccattler.engine.runner import Runner
    from ccattler.engine.store import open_store

    rng = random.Random(11)
    tmp = Path(tempfile.mkdtemp(prefix="npe2e-"))
    agents = Agents(args.real)
    server = runner = store = None
    try:
        agents.network()
        files = init_cluster(tmp / "pki", "127.0.0.1:7443",
                             extra_hosts=tuple(agents.host_ip(k) for k in range(args.real)))
        ca = files.load_ca()
        for k in range(args.real):
            key = new_key()
            (tmp / f"n{k}.key").write_bytes(key_pem(key))
            cert = ca.issue(key.public_key(), name=f"n{k}", kind="node", lifetime=NODE_LIFETIME)
            (tmp / f"n{k}.crt").write_bytes(cert_pem(cert))
        store = open_store(f"sqlite://{tmp}/state.db")
        values = world(args.services, args.rules, WORLD_NODES)
        for k in range(args.real):
            values[f"derived/network/subnet/n{k}"] = {"node": f"n{k}", "subnet": f"10.99.{k}.0/24"}
        items = list(values.items())
        for start in range(0, len(items), 5000):
            store.txn(puts=dict(items[start:start + 5000]))
        server = ApiServer(store, files, ServerOptions(listen="0.0.0.0:0", token_listen="0.0.0.0:0",
                                                       metrics_listen=None)).start()
        port = int(server.listen.rpartition(":")[2])
        real = [f"n{k}" for k in range(args.real)]
        t0 = time.perf_counter()
        runner = Runner(store, [NetpolicyController()])
        runner.start()
        docs = wait_docs(store, real)
        first_pass = time.perf_counter() - t0
        print(f"controller first pass {first_pass:.1f} s", file=sys.stderr, flush=True)
        ready = agents.start(tmp, port, str(files.ca_cert))
        print(f"agents ready: {ready}", file=sys.stderr, flush=True)

        names = [f"t{i % 100}/s{i}" for i in range(args.services)]
        where = {i: i % WORLD_NODES for i in range(args.services)}  # service → node index
        ips = {i: values[f"derived/network/ip/t{i % 100}/s{i}-0"]["ip"] for i in range(args.services)}
        movable = [i for i in range(args.services) if where[i] < args.real]
        rng.shuffle(movable)
        rows, last_rule = [], None
        for n in range(args.warmup + args.changes):
            kind = ("add", "remove", "move")[n % 3]
            time.sleep(rng.uniform(0, 1.0))
            queries: dict[int, dict] = {}
            if kind == "add":
                d = rng.choice([i for i in movable if where[i] < args.real])
                src, port_, dest = names[(d + 50) % args.services], 6000 + n, names[d]
                key = f"desired/network/{dest.split('/')[0]}/e2e{n}"
                rule = {"action": "allow", "from": src, "to": dest, "port": port_, "protocol": "tcp"}
                queries[where[d]] = {"preds": [["tuple", dest, src, port_, "tcp", True]]}
                last_rule = (key, dest, src, port_, where[d])
                write = {"puts": {key: rule}}
            elif kind == "remove":
                key, dest, src, port_, node = last_rule
                queries[node] = {"preds": [["tuple", dest, src, port_, "tcp", False]]}
                write = {"deletes": [key]}
            else:
                j = movable.pop()
                a = where[j]
                b = (a + 1 + rng.randrange(args.real - 1)) % args.real if args.real > 1 else a
                old, new = ips[j], f"10.250.{n // 250}.{2 + n % 250}"
                ident = names[j]
                for k in range(args.real):
                    preds = []
                    if k == b:
                        preds += [["local", ident, new, True], ["addr", ident, [new]]]
                    elif sources(docs[f"n{k}"], ident):
                        preds.append(["addr", ident, [new]])
                    if k == a and k != b:
                        preds.append(["local", ident, old, False])
                    if preds:
                        queries[k] = {"preds": preds, "identities": [IDENTITY + ident]}
                key = f"derived/network/ip/{ident}-0"
                write = {"puts": {key: {"instance": f"s{j}-0", "service": ident, "node": f"n{b}", "ip": new}}}
                where[j], ips[j] = b, new
            verify = n % 5 == 0
            t0 = time.perf_counter()
            for query in queries.values():
                query.update(since=t0, verify=verify)
            stats = next(iter(runner.stats.values()))  # the one controller's
            spent, runs = stats.reconcile_seconds_sum, stats.reconciles
            store.txn(**write)
            answers = agents.ask(queries)
            last = max(answers.values(), key=lambda a: a["done"])  # the node that held it last
            done, arrived = last["done"], last["arrived"] or t0
            row = {"kind": kind, "nodes": len(queries), "ms": round(1000 * (done - t0), 1),
                   # of the last node: store → its agent (the controller's solve and write, the
                   # watch), → its data-plane sync starting (the reconcile before it), → its plane's
                   # apply returned (state build + nft transaction); the apply alone
                   "to_agent_ms": round(1000 * (arrived - t0), 1),
                   "agent_wait_ms": round(1000 * max(0.0, (last["sync_start"] or arrived) - arrived), 1),
                   "sync_ms": round(1000 * (done - max(last["sync_start"] or arrived, arrived)), 1),
                   "apply_ms": last["apply_ms"],
                   # the controller's reconciles meanwhile (part of to_agent_ms), and how many
                   "controller_ms": round(1000 * (stats.reconcile_seconds_sum - spent), 1),
                   "reconciles": stats.reconciles - runs}
            if verify:
                row["kernel"] = all(a.get("kernel") for a in answers.values())
                assert row["kernel"], (row, answers)
            if n < args.warmup:
                row["warmup"] = True
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if kind == "move":  # what the next move reads: the documents as they are now
                docs = {n_: store.get(FIREWALL + n_).value for n_ in real}

        def summary(selected: list[dict]) -> dict:
            ms = [r["ms"] for r in selected]
            parts = {f"{name}_p50": round(statistics.median(r[name] for r in selected), 1)
                     for name in ("to_agent_ms", "controller_ms", "agent_wait_ms", "sync_ms", "apply_ms")}
            return {"changes": len(ms), "p50_ms": round(statistics.median(ms), 1),
                    "p99_ms": round(pct(ms, 0.99), 1), "max_ms": round(max(ms), 1), **parts}

        tuples = {n_: sum(len(p["allowed"]) for p in d.value["policies"].values())
                  for n_, d in ((n_, store.get(FIREWALL + n_)) for n_ in real)}
        return {"services": args.services, "rules_per_service": args.rules, "world_nodes": WORLD_NODES,
                "real_nodes": args.real, "controller_first_pass_s": round(first_pass, 1),
                "agents": ready, "tuples_per_real_node": tuples,
                "warmup": [r for r in rows if r.get("warmup")],
                "all": summary(timed := [r for r in rows if not r.get("warmup")]),
                **{k: summary([r for r in timed if r["kind"] == k]) for k in ("add", "remove", "move")},
                "kernel_checked": sum(1 for r in rows if "kernel" in r), "rows": rows}
    finally:
        agents.close()
        if runner is not None:
            runner.stop()
        if server is not None:
            server.stop(0)
        if store is not None:
            store.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    a = sub.add_parser("agent")
    for name in ("node", "server", "ca", "cert", "key", "state", "bridge", "cgroup", "address"):
        a.add_argument(f"--{name}", required=True)
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--rules", type=int, default=10)
    parser.add_argument("--real", type=int, default=4, help="real nodes (agents with nftables in a netns)")
    parser.add_argument("--changes", type=int, default=30, help="timed changes (add, remove, move in turn)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="changes first, reported apart: the controller's first partial solve after "
                             "its whole one (1.8-6.9 s here) is a once-per-start cost")
    args = parser.parse_args()
    if args.command == "agent":
        agent(args)
        return
    if os.geteuid() != 0 or not shutil.which("nft"):
        sys.exit("needs root and nft")
    start = time.time()
    results = driver(args)
    results.update(wall_s=round(time.time() - start, 1),
                   date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load=os.getloadavg())
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
