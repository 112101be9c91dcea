"""A 1,000-instance rolling update on the simulated cluster, through the real processes: `cca up
--sim-nodes N --detach` (server, runner, one agent process hosting N simulated nodes), apply a
service of `--instances` instances, wait until every one runs, apply a new image and time until
its rollout document says `complete` and every instance runs the new spec. Each round also records,
from the store's watch per revision, the most instance documents at once and the fewest ready.

Run: `.venv/bin/python bench/rollout_bench.py [--instances 1000] [--nodes 20] [--max-extra 250]
[--max-unavailable 250] [--rounds 3]` (Kubernetes' Deployment default is 25 % / 25 %: for 1,000
replicas maxSurge 250, maxUnavailable 250).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ccattler.dsl import Source
from ccattler.engine.clientconfig import free_port_pair

CCA = (sys.executable, "-m", "ccattler.cli.main")


def service(count: int, version: int, extra: int, unavailable: int) -> Source:
    text = (f"service web {{\n  image app:{version}\n  instances {count}\n  command \"serve {version}\"\n"
            f"  update {{ max_unavailable {unavailable}  max_extra {extra} }}\n"
            "  resources { cpu 10m  memory 16Mi }\n}\n")
    return Source("web.cca", text)


def cca(env: dict, *args: str) -> str:
    return subprocess.run([*CCA, *args], env=env, check=True, capture_output=True, text=True).stdout


def admin(env: dict):  # noqa: ANN201
    from ccattler.engine.api.client import Client
    from ccattler.engine.clientconfig import load_config

    return Client(load_config(Path(env["CCA_HOME"])).context(None), timeout=60)


def until(predicate, timeout: float, step: float = 0.2) -> float:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g}s")
        time.sleep(step)
    return time.monotonic()


def rollout_state(api) -> dict:  # noqa: ANN001
    from ccattler.engine.api.gen.ccattler.v1 import api_pb2
    from ccattler.engine.facts import CcaError

    try:
        return api.json("Rollout", api_pb2.RolloutRequest(service="web", action="status"))
    except CcaError:
        return {}


def all_running(api, count: int, image: str) -> bool:  # noqa: ANN001
    rows = api.get("instances")["items"]
    return len(rows) == count and all(r["state"] == "running" and r["value"]["image"] == image for r in rows)


class Extremes:
    """Per revision of the store: instance documents of `web` and how many of them are ready."""

    def __init__(self, env: dict, docs: dict[str, bool], ready: dict[str, bool]) -> None:
        self.api = admin(env)
        self.docs, self.ready = docs, ready
        self.most, self.fewest = len(docs), sum(ready.values())
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        from ccattler.engine.facts import CcaError

        revision = None
        try:
            for event in self.api.watch(""):
                if revision is not None and event["revision"] != revision:
                    self.most = max(self.most, len(self.docs))
                    self.fewest = min(self.fewest, sum(self.ready.get(n, False) for n in self.docs))
                revision = event["revision"]
                key, value = event["key"], event["value"]
                if key.startswith("derived/instance/default/web/"):
                    name = key.rsplit("/", 1)[1]
                    if value is None:
                        self.docs.pop(name, None)
                    else:
                        self.docs[name] = True
                elif key.startswith("observed/instance/default/web-"):
                    self.ready[key.rsplit("/", 1)[1]] = bool(value and value.get("ready"))
        except CcaError:
            return


def one_round(tmp: Path, args: argparse.Namespace) -> tuple[float, int, int]:
    env = os.environ | {"CCA_HOME": str(tmp / "home")}
    cca(env, "up", "--detach", "--sim-nodes", str(args.nodes), "--server", f"127.0.0.1:{free_port_pair()}",
        "--state-dir", str(tmp / "state"), "--metrics", "off", "--timeout", "120")
    try:
        with admin(env) as api:
            api.apply([service(args.instances, 1, args.max_extra, args.max_unavailable)])
            until(lambda: all_running(api, args.instances, "app:1"), 600, 1.0)
            until(lambda: rollout_state(api).get("state") == "complete", 60)
            rows = api.get("instances")["items"]
            extremes = Extremes(env, {r["name"]: True for r in rows}, {r["name"]: r["ready"] for r in rows})
            time.sleep(1.0)  # the watch is open
            start = time.monotonic()
            api.apply([service(args.instances, 2, args.max_extra, args.max_unavailable)])
            until(lambda: rollout_state(api).get("state") == "complete", 1800, 0.5)
            done = until(lambda: all_running(api, args.instances, "app:2"), 600, 0.5)
            return done - start, extremes.most, extremes.fewest
    finally:
        subprocess.run([*CCA, "down"], env=env, capture_output=True, timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--max-extra", type=int, default=250)
    parser.add_argument("--max-unavailable", type=int, default=250)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    durations = []
    for n in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            took, most, fewest = one_round(Path(tmp), args)
        durations.append(took)
        print(f"round {n + 1}: {took:.1f} s (at most {most} instance documents, at least {fewest} ready; "
              f"bounds {args.instances + args.max_extra} / {args.instances - args.max_unavailable})",
              flush=True)
    print(f"rolling update of {args.instances} instances on {args.nodes} simulated nodes, max_extra "
          f"{args.max_extra} / max_unavailable {args.max_unavailable}: "
          f"median {statistics.median(durations):.1f} s of {args.rounds} "
          f"({', '.join(f'{d:.1f}' for d in durations)} s)")


if __name__ == "__main__":
    main()
