"""Server memory with watchers that never read (issue 12 class 6).

Starts a real `cca server` (SQLite, no controllers) in a child process, opens `--stalled` Watch
streams that never read, one watcher that reads, and applies `--applies` versions of a service
whose spec carries `--doc-kib` KiB; samples the server's RSS. Reports the RSS before and at its
peak, whether the stalled streams were cut off with RESOURCE_EXHAUSTED and whether the reader saw
every version. Run with `--watch-max-bytes` huge to see the unbounded behaviour for comparison.

    .venv/bin/python bench/watch_memory_bench.py --stalled 4 --applies 60 --doc-kib 900
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

from ccattler.dsl.sources import Source
from ccattler.engine.api.client import Client
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.clientconfig import Context
from ccattler.engine.pki import init_cluster


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stalled", type=int, default=4)
    parser.add_argument("--applies", type=int, default=60)
    parser.add_argument("--doc-kib", type=int, default=900)
    parser.add_argument("--watch-max-bytes", type=int, default=8 << 20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cca-wmb-") as tmp:
        files = init_cluster(Path(tmp) / "pki", "127.0.0.1:7443")
        server = subprocess.Popen(
            [sys.executable, "-m", "ccattler.cli.main", "server", "--pki", str(files.root),
             "--store", f"sqlite://{tmp}/state.db", "--listen", "127.0.0.1:0",
             "--token-listen", "127.0.0.1:0", "--controllers", "off", "--metrics", "off",
             "--rate", "100000", "--max-message-bytes", str(8 << 20),
             "--watch-max-bytes", str(args.watch_max_bytes)],
            stderr=subprocess.PIPE, text=True)
        try:
            address = None
            for line in server.stderr:
                if (match := re.search(r"serving mutual TLS on (\S+), bearer tokens on ([^,\s]+)", line)):
                    address, token = match.group(1), match.group(2)
                    break
            if address is None:
                raise SystemExit("server did not start")
            threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
            context = Context(name="b", server=address, token_server=token, ca=str(files.ca_cert),
                              cert=str(files.admin_cert), key=str(files.admin_key))
            api = Client(context, timeout=120)
            start = api.json("Status")["revision"]
            stalled = [api.cluster.Watch(api_pb2.WatchRequest(prefix="desired/", from_revision=start))
                       for _ in range(args.stalled)]
            seen: set[int] = set()

            def read() -> None:
                try:
                    for event in Client(context, timeout=120).watch("desired/service/", start):
                        seen.add(event["revision"])
                except Exception as exc:  # the server stops at the end
                    print(f"reader stopped: {exc}", file=sys.stderr)

            threading.Thread(target=read, daemon=True).start()
            time.sleep(1)
            before, peak, written = rss_mib(server.pid), 0.0, []
            for i in range(args.applies):
                blob = f"{i:06d}" + "x" * (args.doc_kib * 1024)
                text = f'service big {{\n  image "busybox:1"\n  env {{ BLOB = "{blob}" }}\n}}\n'
                api.apply([Source("big.cca", text)])
                written.append(api.json("Status")["revision"])
                peak = max(peak, rss_mib(server.pid))
            time.sleep(2)
            peak = max(peak, rss_mib(server.pid))
            codes = []
            for call in stalled:
                threading.Timer(10, call.cancel).start()  # unbounded: the stream would never end
                try:
                    for _ in call:
                        pass
                    codes.append("OK")
                except grpc.RpcError as exc:
                    codes.append(exc.code().name)
            deadline = time.monotonic() + 60
            while len(seen) < args.applies and time.monotonic() < deadline:
                time.sleep(0.2)
            print(f"watch_max_bytes={args.watch_max_bytes} stalled={args.stalled} applies={args.applies} "
                  f"doc={args.doc_kib} KiB written={args.applies * args.doc_kib / 1024:.0f} MiB")
            print(f"server RSS before {before:.0f} MiB, peak {peak:.0f} MiB (+{peak - before:.0f} MiB)")
            print(f"stalled streams ended: {codes}")
            print(f"reader saw {len(seen)} of {args.applies} versions of the service")
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
