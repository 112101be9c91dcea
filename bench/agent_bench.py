"""Runtime cost of starting N busybox containers on this node: from one `reconcile` call to every
container running, and to every one answering HTTP at its own address (runc, veth, bridge, NAT).

Run as root: `.venv/bin/python bench/agent_bench.py [--containers 20] [--rounds 3] [--workers 8]`.
Prints per-round figures and medians; also the cost of each step for one container
(network attach, create = overlay + bundle, runc run) and of removing them all.
`--sim NODES` instead measures simulated nodes in this one process (no root needed): one reconcile
tick over every node with `--containers` instances each, and the memory they hold.
`--api` measures through a real API server (mutual TLS, SQLite): from the transaction that places
the instances to every `observed/instance` document saying running in the store (agent loop, slice
watch, runc, report) — the node side of apply → all running, without the controllers.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from ccattler.agent.desired import InstanceSpec
from ccattler.agent.images.busybox import build_busybox
from ccattler.agent.images.store import ImageStore
from ccattler.agent.net.node import NodeNetwork
from ccattler.agent.reconcile import Backoff, Reconciler
from ccattler.agent.runtime.runc import RuncRuntime

HTTPD = "mkdir -p /www && echo hello from $HOSTNAME > /www/index.html && exec httpd -f -p 8080 -h /www"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _answers(ip: str) -> bool:
    try:
        with _DIRECT.open(f"http://{ip}:8080/", timeout=0.5) as response:
            return response.status == 200
    except OSError:
        return False


def one_round(state: Path, images: ImageStore, n: int, workers: int) -> dict[str, float]:
    bridge = f"cb{random.randrange(16**4):04x}"
    third = random.randrange(256)
    runtime = RuncRuntime(state, images, runc_root=state / "runc")
    network = NodeNetwork(f"10.251.{third}.0/24", state, bridge=bridge)
    t0 = time.perf_counter()
    network.setup()
    setup = time.perf_counter() - t0
    reconciler = Reconciler("bench", runtime, network, backoff=Backoff(), stop_timeout=0.2, workers=workers)
    desired = {}
    for i in range(n):
        spec = InstanceSpec("default", f"web-{i}", "default/web", "busybox", HTTPD, cpu=100, memory=32 << 20,
                            ip=f"10.251.{third}.{i + 2}")
        desired[spec.key] = spec
    try:
        t0 = time.perf_counter()
        observed = reconciler.reconcile(desired)
        running = time.perf_counter() - t0
        assert all(doc["state"] == "running" for doc in observed.values()), observed
        pending = {spec.ip for spec in desired.values()}
        while pending:
            pending = {ip for ip in pending if not _answers(ip)}
        answering = time.perf_counter() - t0
        t0 = time.perf_counter()
        reconciler.reconcile({})
        removed = time.perf_counter() - t0
    finally:
        reconciler.remove_all()
        reconciler.close()
        network.teardown()
        network.close()
    return {"setup": setup, "running": running, "answering": answering, "remove": removed}


def steps(state: Path, images: ImageStore) -> dict[str, float]:
    """Each step for one container, timed alone."""
    runtime = RuncRuntime(state, images, runc_root=state / "runc")
    network = NodeNetwork("10.252.0.0/24", state, bridge="cbstep")
    network.setup()
    spec = InstanceSpec("default", "web-0", "default/web", "busybox", HTTPD, ip="10.252.0.2")
    try:
        t0 = time.perf_counter()
        att = network.attach(spec.key, spec.ip)
        t1 = time.perf_counter()
        runtime.create(spec.container(att.netns_path))
        t2 = time.perf_counter()
        runtime.start(spec.key)
        t3 = time.perf_counter()
        runtime.list()
        t4 = time.perf_counter()
    finally:
        runtime.remove(spec.key)
        network.teardown()
        network.close()
    return {"attach": t1 - t0, "create": t2 - t1, "runc run": t3 - t2, "list": t4 - t3}


def sim(nodes: int, per_node: int) -> None:
    import resource

    from ccattler.agent.node import NodeCore
    from ccattler.agent.runtime.sim import SimProfile, SimRuntime

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cores = [NodeCore(f"n{i}", SimRuntime(SimProfile(start_delay=0.0, crash_probability=0.01)))
             for i in range(nodes)]
    slices = []
    for i in range(nodes):
        facts = {"desired/service/default/web": {"image": "busybox", "command": "httpd",
                                                 "resources": {"cpu": 100, "memory": 1 << 20}}}
        for j in range(per_node):
            facts[f"derived/placement/default/web-{i}-{j}"] = {"service": "default/web",
                                                               "instance": f"web-{i}-{j}", "node": f"n{i}"}
        slices.append(facts)
    ticks = []
    for _ in range(3):
        t0 = time.perf_counter()
        for core, facts in zip(cores, slices, strict=True):
            core.apply(facts)
        ticks.append(time.perf_counter() - t0)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{nodes} sim nodes x {per_node} instances: first tick (all start) {ticks[0]:.3f}s, "
          f"steady ticks {ticks[1]:.3f}s {ticks[2]:.3f}s, max RSS +{(after - before) / 1024:.0f} MiB")


def through_api(state: Path, n: int, rounds: int) -> None:
    import dataclasses
    import threading

    from ccattler.agent.loop import AgentLoop
    from ccattler.agent.machine import node_document
    from ccattler.agent.node import NodeCore
    from ccattler.engine.api.agent_client import AgentClient
    from ccattler.engine.api.client import Client
    from ccattler.engine.api.gen.ccattler.v1 import api_pb2
    from ccattler.engine.api.server import ApiServer, ServerOptions
    from ccattler.engine.auth import create_token
    from ccattler.engine.clientconfig import Context
    from ccattler.engine.pki import init_cluster, key_pem, make_csr, new_key
    from ccattler.engine.store import open_store

    files = init_cluster(state / "pki", "127.0.0.1:7443")
    store = open_store(f"sqlite://{state}/state.db")
    server = ApiServer(store, files, ServerOptions(listen="127.0.0.1:0", token_listen="127.0.0.1:0",
                                                   metrics_listen="127.0.0.1:0")).start()
    context = Context(name="bench", server=server.listen, token_server=server.token_listen,
                      ca=str(files.ca_cert), cert=None, key=None)
    key = new_key()
    with Client(context, anonymous=True) as anon:
        reply = anon.unary(anon.agent, "Join", api_pb2.JoinRequest(
            token=create_token(store, "join", 60)[0], node="bench", csr=make_csr(key, "bench")))
    (state / "node.crt").write_bytes(reply.cert)
    (state / "node.key").write_bytes(key_pem(key))
    client = Client(dataclasses.replace(context, cert=str(state / "node.crt"), key=str(state / "node.key")))
    third = random.randrange(256)
    runtime = RuncRuntime(state, ImageStore(state), runc_root=state / "runc")
    core = NodeCore("bench", runtime, state_dir=state, bridge=f"cb{random.randrange(16**4):04x}",
                    stop_timeout=0.2)
    stop = threading.Event()
    loop = AgentLoop(AgentClient(client), core, node_document(), ttl=10, tick=0.2)
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    store.put("desired/service/default/web", {"image": "busybox", "command": HTTPD, "env": {},
                                              "config": {"env": {}, "files": []},
                                              "resources": {"cpu": 100, "memory": 32 << 20}})
    store.put("derived/network/subnet/bench", {"node": "bench", "subnet": f"10.251.{third}.0/24"})
    # what the network-policy controller writes: the agent starts nothing it has not decided
    store.put("derived/firewall/bench", {"node": "bench", "identities": {}, "policies": {},
                                         "open": ["default/web"]})
    figures = []
    try:
        for r in range(rounds):
            placements = {}
            for i in range(n):
                name = f"web-{r}-{i}"
                placements[f"derived/placement/default/{name}"] = {"service": "default/web",
                                                                   "instance": name, "node": "bench"}
                placements[f"derived/network/ip/default/{name}"] = {"node": "bench",
                                                                    "ip": f"10.251.{third}.{i + 2}"}
            t0 = time.perf_counter()
            store.txn(puts=placements)
            while True:
                facts, _ = store.range("observed/instance/default/")
                if sum(f.value["state"] == "running" for f in facts) == n:
                    break
                time.sleep(0.01)
            figures.append(time.perf_counter() - t0)
            store.txn(deletes=list(placements))
            while store.range("observed/instance/default/")[0]:
                time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=10)
        core.shutdown(remove=True)
        client.close()
        server.stop(0)
        store.close()
    print(f"through the API, {n} containers: placements committed → all reported running: median "
          f"{statistics.median(figures):.3f}s   rounds {' '.join(f'{v:.3f}' for v in figures)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--containers", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--sim", type=int, metavar="NODES", help="measure simulated nodes instead")
    parser.add_argument("--api", action="store_true", help="measure through a real API server")
    args = parser.parse_args()
    if args.sim:
        sim(args.sim, args.containers)
        return
    if os.geteuid() != 0:
        raise SystemExit("run as root: the benchmark starts real runc containers")
    with tempfile.TemporaryDirectory(prefix="cca-bench-") as tmp:
        state = Path(tmp)
        images = ImageStore(state)
        build_busybox(images)
        images.rootfs("busybox")
        if args.api:
            through_api(state, args.containers, args.rounds)
            return
        print(f"{os.cpu_count()} cpus; {args.containers} busybox httpd containers per round, "
              f"{args.rounds} rounds")
        print("one container, step by step (ms): " + ", ".join(
            f"{k} {v * 1000:.0f}" for k, v in steps(state, images).items()))
        for workers in args.workers:
            rounds = [one_round(state, images, args.containers, workers) for _ in range(args.rounds)]
            for key in ("setup", "running", "answering", "remove"):
                values = [r[key] for r in rounds]
                print(f"workers={workers:<2} {key:<10} median {statistics.median(values):6.3f}s   "
                      f"rounds {' '.join(f'{v:.3f}' for v in values)}")


if __name__ == "__main__":
    main()
