"""What a workload identity costs a node: `IssueIdentity` over real mutual TLS (the node's key and
CSR made here, the SVID checked on arrival: `agent.identity.request_identity`) against the anchor
in the same run, a single-instance `FetchSecrets` (one secret) — both unary calls to the same
in-process server, audited the same way.

    .venv/bin/python bench/identity_bench.py --calls 200 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ccattler.agent.desired import InstanceSpec
from ccattler.agent.identity import request_identity
from ccattler.engine.api.agent_client import AgentClient
from ccattler.engine.api.client import Client
from ccattler.engine.api.enroll import join_cluster
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.api.server import ApiServer, ServerOptions
from ccattler.engine.auth import create_token
from ccattler.engine.pki import init_cluster
from ccattler.engine.secrets import LocalKeyProvider, set_secret
from ccattler.engine.store import open_store


def _timed(action, calls: int) -> float:
    """Median milliseconds of `calls` calls of `action(i)`."""
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        action(i)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = init_cluster(root / "pki", "127.0.0.1:7443")
        store = open_store(f"sqlite://{root}/state.db")
        options = ServerOptions(listen="127.0.0.1:0", token_listen="127.0.0.1:0", metrics_listen=None,
                                rate=100_000, burst=100_000)
        server = ApiServer(store, files, options).start()
        try:
            set_secret(store, LocalKeyProvider.from_file(files.master_key), "token", "shop", b"s3cret")
            placements = [(f"derived/placement/shop/web-{i}",
                           {"service": "shop/web", "instance": f"web-{i}", "node": "n1"})
                          for i in range(args.calls)]
            store.txn((), [("desired/service/shop/web", {"secrets": [{"name": "shop/token"}]}), *placements])
            node = join_cluster(server.listen, create_token(store, "join", 60)[0], files.ca_cert, "n1",
                                root / "node", "n1", server.token_listen)
            with Client(node, timeout=30) as client:
                agent = AgentClient(client)
                specs = [InstanceSpec(tenant="shop", name=f"web-{i}", service="shop/web", image="busybox")
                         for i in range(args.calls)]

                def identity(i: int) -> None:
                    request_identity(agent.issue_identity, specs[i], time.time())

                def secrets(i: int) -> None:
                    request = api_pb2.SecretsRequest(instance=f"shop/web-{i}")
                    client.unary(client.agent, "FetchSecrets", request)

                for round_ in range(1, args.rounds + 1):
                    ours, anchor = _timed(identity, args.calls), _timed(secrets, args.calls)
                    print(f"round {round_}: IssueIdentity (key + CSR + call + check) median {ours:.2f} ms, "
                          f"FetchSecrets (anchor) median {anchor:.2f} ms, ratio {ours / anchor:.2f}")
        finally:
            server.stop(0)
            store.close()


if __name__ == "__main__":
    main()
