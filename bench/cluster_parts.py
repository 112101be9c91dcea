"""The processes of the cluster benchmark: `serve` (API server + runner over one store, in its own
process so its CPU and memory are its own) and `agents` (many sim-runtime nodes, each with its own
node certificate and mutual-TLS connection: an `AgentLoop`, or with `--hollow` a hollow node of
bench/hollow_agents.py), plus the generated cluster.

Run by bench/cluster_bench.py as `python bench/cluster_parts.py serve|agents ARGS`; the server
answers JSON requests on stdin, one line each (`stats`: CPU seconds of the whole process and of the
runner's threads, RSS, controller counters; the waits of bench/cluster_view.py), agents print
`ready` once every node's loop has started.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster_view import ClusterView, command  # noqa: E402

ZONES = ("a", "b", "c", "d")
#: Wide enough for 1,000+ nodes at one /24 each (the default 10.88.0.0/16 holds 256).
CLUSTER_CIDR = "10.0.0.0/8"
#: Virtual IPs outside the /8 the 1,000 simulated nodes need (numbers only: no traffic is sent).
SERVICE_CIDR = "172.31.0.0/16"


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    zone: str
    labels: dict
    restrictions: tuple[str, ...]
    cpu: int  # millicores
    memory: int  # bytes


def cluster_nodes(count: int, seed: int = 1) -> list[NodeSpec]:
    """Nodes of 32/48/64 cores (4 GiB per core) in 4 zones; disk=ssd on half, 5% gpu nodes."""
    rnd = random.Random(seed)
    nodes = []
    for i in range(count):
        cores = rnd.choice((32, 48, 64))
        labels = {"disk": "ssd" if i % 2 == 0 else "hdd", "rack": f"r{i % 10}"}
        gpu = i % 20 == 6  # an ssd node: gpu services may also require disk=ssd
        if gpu:
            labels["gpu"] = "true"
        nodes.append(NodeSpec(f"sim{i:04d}", ZONES[i % len(ZONES)], labels, ("gpu",) if gpu else (),
                              cores * 1000, cores * 4 << 30))
    return nodes


def services_text(instances: int, factor: float = 1.0, seed: int = 1) -> tuple[str, int]:
    """A .cca file of services totalling `instances` replicas (times `factor`, rounded up per
    service): mixed requests; one in six each with zone spread, require disk=ssd, prefer disk=ssd,
    separate from the previous service; one in twenty on gpu nodes. Returns (text, replicas)."""
    rnd = random.Random(seed)
    lines, total, scaled, i = [], 0, 0, 0
    while total < instances:
        count = min(rnd.randint(5, 15), instances - total)
        total += count
        cpu = rnd.choice(("100m", "250m", "500m", "1"))
        memory = rnd.choice(("128Mi", "256Mi", "512Mi", "1Gi"))
        rules = []
        if i % 6 == 0:
            rules.append("zone spread")
        if i % 6 == 1:
            rules.append("require disk = ssd")
        if i % 6 == 2:
            rules.append("prefer disk = ssd weight 2")
        if i % 6 == 3 and i:
            rules.append(f'separate "s{i - 1:04d}"')
        if i % 20 == 19:
            rules.append("require gpu = true  accept gpu")
        placement = f"    placement {{ {'  '.join(rules)} }}\n" if rules else ""
        replicas = math.ceil(count * factor)
        scaled += replicas
        lines.append(f"service s{i:04d} {{\n    image busybox\n    instances {replicas}\n"
                     f"    resources {{ cpu {cpu}  memory {memory} }}\n{placement}}}\n")
        i += 1
    return "\n".join(lines), scaled


# -- the server process ------------------------------------------------------------------------

def _thread_cpu(native_id: int) -> float:
    try:
        fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stats(runner) -> dict:
    """CPU seconds of this process and of the runner's threads (loop, leader, cache pumps), RSS."""
    own = os.times()
    runner_cpu = sum(_thread_cpu(t.native_id) for t in threading.enumerate()
                 if t.native_id and (t.name in ("runner", "leader-election") or "_pump" in t.name))
    rss = peak = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
        elif line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return {"cpu": own.user + own.system, "runner_cpu": runner_cpu, "rss": rss, "peak_rss": peak,
            "controllers": {name: stats.as_dict() for name, stats in runner.stats.items()}}


def serve(args: argparse.Namespace) -> None:
    from ccattler.engine.api.server import ApiServer, ServerOptions
    from ccattler.engine.controllers.registry import ControllerConfig, default_controllers
    from ccattler.engine.pki import ClusterFiles
    from ccattler.engine.runner import Runner
    from ccattler.engine.store import open_store

    store = open_store(args.store)
    # The sync gRPC server holds a thread per open stream: per node the slice watch, the tunnel for
    # logs/exec, and a heartbeat call.
    options = ServerOptions(listen="127.0.0.1:0", token_listen="127.0.0.1:0", metrics_listen=None,
                            workers=4 * args.nodes + 128)
    api = ApiServer(store, ClusterFiles(Path(args.pki)), options).start()
    config = ControllerConfig(cluster_cidr=CLUSTER_CIDR, service_cidr=SERVICE_CIDR)
    runner = Runner(store, default_controllers(config))
    runner.start()
    view = ClusterView()
    threading.Thread(target=view.follow, args=(store, store.revision()), daemon=True).start()
    print(json.dumps({"listen": api.listen, "pid": os.getpid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "quit":
            break
        try:
            answer = _stats(runner) if request["op"] == "stats" else command(view, request)
        except Exception as exc:  # the driver reports it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
    runner.stop()
    api.stop(0.5)
    store.close()


# -- an agents process -------------------------------------------------------------------------

def agents(args: argparse.Namespace) -> None:
    import grpc._common

    from ccattler.agent.loop import AgentLoop
    from ccattler.agent.node import NodeCore
    from ccattler.agent.runtime.sim import SimProfile, SimRuntime
    from ccattler.engine.api.agent_client import AgentClient
    from ccattler.engine.api.client import Client
    from ccattler.engine.clientconfig import Context

    # gRPC's blocking stream iterators wake every 0.1 s (so a signal is noticed soon); with two
    # streams open per node (slice watch, tunnel) a host simulating 25 nodes wakes 500 times a
    # second, all contending for one GIL. A real agent hosts one node and pays this once.
    grpc._common.MAXIMUM_WAIT_TIMEOUT = 1.0
    specs = [NodeSpec(**{**spec, "restrictions": tuple(spec["restrictions"])})
             for spec in json.loads(Path(args.nodes_file).read_text())]
    if args.hollow:
        return hollow_agents(args, specs)
    stop = threading.Event()
    loops = []
    for spec in specs:
        context = Context(name=spec.name, server=args.server, ca=args.ca,
                          cert=f"{args.certs}/{spec.name}.crt", key=f"{args.certs}/{spec.name}.key")
        core = NodeCore(spec.name, SimRuntime(SimProfile(start_delay=args.start_delay)))
        loop = AgentLoop(AgentClient(Client(context)), core, _node_document(spec), ttl=args.ttl,
                         tick=args.tick, start_jitter=args.spread)
        loops.append(loop)
        threading.Thread(target=loop.run, args=(stop,), name=f"agent-{spec.name}", daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()  # until the driver closes our stdin (or kills us: no clean shutdown)
    stop.set()


def _node_document(spec: NodeSpec) -> dict:
    from ccattler.agent.machine import node_document

    return node_document(capacity={"cpu": spec.cpu, "memory": spec.memory}, labels=spec.labels,
                         zone=spec.zone, restrictions=spec.restrictions, address="192.0.2.1",
                         architecture="amd64")


def hollow_agents(args: argparse.Namespace, specs: list[NodeSpec]) -> None:
    """The same nodes as hollow ones (bench/hollow_agents.py): one event loop, no thread per node.
    Their counters go to standard error when the driver closes standard input."""
    import asyncio
    import logging

    from hollow_agents import host

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    nodes = [(spec.name, _node_document(spec), Path(f"{args.certs}/{spec.name}.key").read_bytes(),
              Path(f"{args.certs}/{spec.name}.crt").read_bytes()) for spec in specs]
    counts = asyncio.run(host(nodes, args.server, Path(args.ca).read_bytes(), ttl=args.ttl, tick=args.tick,
                              container_start=args.start_delay, spread=args.spread))
    print(json.dumps(dict(counts)), file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--store", required=True)
    s.add_argument("--pki", required=True)
    s.add_argument("--nodes", type=int, required=True)
    a = sub.add_parser("agents")
    a.add_argument("--server", required=True)
    a.add_argument("--ca", required=True)
    a.add_argument("--certs", required=True)
    a.add_argument("--nodes-file", required=True)
    a.add_argument("--ttl", type=float, default=10.0)
    a.add_argument("--tick", type=float, default=1.0)
    a.add_argument("--start-delay", type=float, default=0.0)
    a.add_argument("--spread", type=float, default=0.0, help="first registrations spread over [0, SPREAD) s")
    a.add_argument("--hollow", action="store_true", help="hollow nodes on one event loop (hollow_agents.py)")
    args = parser.parse_args()
    (serve if args.command == "serve" else agents)(args)


if __name__ == "__main__":
    main()
