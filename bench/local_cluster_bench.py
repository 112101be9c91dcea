"""The whole system's two headline figures, through real processes (`cca server`, `cca agent`):

- `apply`: `cca up` (server + runner + a runc agent, as root), then per round: apply a service of
  `--containers` busybox web servers on the one node and time until every instance is reported
  running (compile, admission, commit, instance/placement/network controllers, the agent's slice
  watch, runc, veth, report); the service is deleted between rounds.
- `failover`: a server and two agents (`--runtime sim` by default, or runc as root) joined with
  tokens; `--instances` instances spread over both; SIGKILL the agent with the most, and time from
  the kill until every instance runs on the other node (the lease expires within TTL of the kill).

Run: `.venv/bin/python bench/local_cluster_bench.py apply [--containers 20] [--rounds 3]` and
`.venv/bin/python bench/local_cluster_bench.py failover [--ttl 10] [--rounds 3]`.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ccattler.dsl import Source
from ccattler.engine.clientconfig import free_port_pair

CCA = (sys.executable, "-m", "ccattler.cli.main")


def service(name: str, count: int) -> Source:
    text = (f'service {name} {{\n  image busybox\n  instances {count}\n'
            '  command "mkdir -p /www && echo hi > /www/index.html && exec httpd -f -p 8080 -h /www"\n'
            '  resources { cpu 10m  memory 16Mi }\n}\n')
    return Source(f"{name}.cca", text)


def cca(env: dict, *args: str) -> str:
    return subprocess.run([*CCA, *args], env=env, check=True, capture_output=True, text=True).stdout


def admin(env: dict):  # noqa: ANN201
    from ccattler.engine.api.client import Client
    from ccattler.engine.clientconfig import load_config

    return Client(load_config(Path(env["CCA_HOME"])).context(None), timeout=30)


def until(predicate, timeout: float = 120.0, step: float = 0.02) -> float:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(step)
    return time.monotonic()


def running(api, svc: str) -> list[dict]:  # noqa: ANN001
    return [i for i in api.get("instances", all_tenants=True)["items"]
            if i["service"] == f"default/{svc}" and i["state"] == "running"]


def bench_apply(containers: int, rounds: int) -> None:
    from ccattler.agent.images.busybox import build_busybox
    from ccattler.agent.images.store import ImageStore
    from ccattler.engine.api.gen.ccattler.v1 import api_pb2

    with tempfile.TemporaryDirectory() as tmp:
        home, state = Path(tmp) / "home", Path(tmp) / "state"
        env = os.environ | {"CCA_HOME": str(home)}
        build_busybox(ImageStore(state))
        bridge, cidr = f"cb{random.randrange(16**4):04x}", f"10.{random.randrange(150, 200)}.0.0/16"
        cca(env, "up", "--detach", "--server", f"127.0.0.1:{free_port_pair()}", "--state-dir", str(state),
            "--bridge", bridge, "--runc-root", str(state / "runc"), "--cluster-cidr", cidr,
            "--metrics", "off")
        times = []
        try:
            with admin(env) as api:
                for n in range(rounds):
                    name = f"web{n}"
                    start = time.monotonic()
                    api.apply([service(name, containers)])
                    times.append(until(lambda name=name: len(running(api, name)) == containers) - start)
                    print(f"round {n + 1}: {containers} containers running {times[-1]:.2f} s after apply")
                    api.json("Delete", api_pb2.DeleteRequest(kind="service", name=name))
                    until(lambda: not api.get("instances", all_tenants=True)["items"])
                    until(lambda: not subprocess.run(["runc", "--root", str(state / "runc"), "list", "-q"],
                                                     capture_output=True, text=True).stdout.strip())
        finally:
            print(cca(env, "down").strip())
    print(f"apply → all {containers} running on one node (runc): median {statistics.median(times):.2f} s "
          f"of {rounds} (all: {', '.join(f'{t:.2f}' for t in times)} s)")


def bench_failover(ttl: float, instances: int, rounds: int, runtime: str) -> None:
    delays = []
    for n in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            delays.append(_failover_round(Path(tmp), ttl, instances, runtime))
        print(f"round {n + 1}: replacements running {delays[-1]:.2f} s after the agent was killed")
    print(f"node loss → replacements running ({runtime}, lease TTL {ttl:g} s, {instances} instances): median "
          f"{statistics.median(delays):.2f} s after the kill of {rounds} (all: "
          f"{', '.join(f'{d:.2f}' for d in delays)} s); target ≤ TTL + 3 s = {ttl + 3:g} s")


def _failover_round(tmp: Path, ttl: float, instances: int, runtime: str) -> float:
    home = tmp / "home"
    env = os.environ | {"CCA_HOME": str(home)}
    cca(env, "init", "--server", f"127.0.0.1:{free_port_pair()}")
    logs = open(tmp / "log", "ab")  # noqa: SIM115
    server = [*CCA, "server", "--store", f"sqlite://{tmp}/state.db", "--metrics", "off",
              "--cluster-cidr", f"10.{random.randrange(150, 200)}.0.0/16"]
    procs = {"server": subprocess.Popen(server, env=env, stdout=logs, stderr=logs)}
    states = {}
    try:
        with admin(env) as api:
            until(lambda: _answers(api), 60, 0.2)
            for node in ("a", "b"):
                token = cca(env, "token", "create").strip()
                states[node] = tmp / node
                if runtime == "runc":
                    from ccattler.agent.images.busybox import build_busybox
                    from ccattler.agent.images.store import ImageStore

                    build_busybox(ImageStore(states[node]))
                procs[node] = subprocess.Popen(
                    [*CCA, "agent", "--runtime", runtime, "--node-id", node, "--token", token,
                     "--ttl", str(ttl),
                     "--state-dir", str(states[node]), "--bridge", f"cf{node}{random.randrange(16**3):03x}",
                     "--runc-root", str(states[node] / "runc")], env=env, stdout=logs, stderr=logs)
            until(lambda: len(api.get("nodes")["items"]) == 2, 60, 0.2)
            api.apply([service("web", instances)])
            until(lambda: len(running(api, "web")) == instances, 120)
            placed = [i["node"] for i in running(api, "web")]
            victim = max(("a", "b"), key=placed.count)
            survivor = "b" if victim == "a" else "a"
            killed = time.monotonic()
            procs[victim].send_signal(signal.SIGKILL)
            done = until(lambda: (r := running(api, "web")) and len(r) == instances
                         and all(i["node"] == survivor for i in r), 120)
            return done - killed
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            proc.wait(30)
        if runtime != "sim":
            from ccattler.agent.machine import cleanup_node

            for state in states.values():
                for bridge in [p.name for p in (state / "net").iterdir()] if (state / "net").exists() else []:
                    cleanup_node(state, runtime, bridge, state / "runc")


def _answers(api) -> bool:  # noqa: ANN001
    from ccattler.engine.facts import CcaError

    try:
        api.json("Status")
        return True
    except CcaError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    apply = sub.add_parser("apply")
    apply.add_argument("--containers", type=int, default=20)
    apply.add_argument("--rounds", type=int, default=3)
    failover = sub.add_parser("failover")
    failover.add_argument("--ttl", type=float, default=10.0)
    failover.add_argument("--instances", type=int, default=6)
    failover.add_argument("--rounds", type=int, default=3)
    failover.add_argument("--runtime", choices=("sim", "runc"), default="sim")
    args = parser.parse_args()
    if args.what == "apply":
        bench_apply(args.containers, args.rounds)
    else:
        bench_failover(args.ttl, args.instances, args.rounds, args.runtime)


if __name__ == "__main__":
    main()
