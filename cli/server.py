"""`cca server`: the API server (mutual-TLS and bearer-token listeners, metrics) over one store,
and (unless `--controllers off`) a runner candidate running the default controllers in the same
process; `cca runner` runs them in a process of their own."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from ccattler.cli._common import reports_errors


@reports_errors
def server(
    store: Annotated[str | None, typer.Option("--store", help="sqlite:///abs/path.db or etcd://host:port[,…] "
                                                              "(default: the context's).")] = None,
    listen: Annotated[str | None, typer.Option("--listen", help="Mutual-TLS address (default: the "
                                                                "context's server).")] = None,
    token_listen: Annotated[str | None, typer.Option("--token-listen", help="Bearer-token address "
                                                                            "(default: next port).")] = None,
    metrics: Annotated[str, typer.Option("--metrics", help="HTTP /metrics and /healthz address; "
                                                           "'off' disables.")] = "127.0.0.1:9443",
    context: Annotated[str | None, typer.Option("--context", help="Context whose PKI to serve.")] = None,
    pki: Annotated[Path | None, typer.Option("--pki", help="Cluster PKI directory (default: the "
                                                           "context's).")] = None,
    runner: Annotated[bool, typer.Option("--runner/--no-runner", help="Run the controllers "
                                                                     "(leader-elected).")] = True,
    controllers: Annotated[str | None, typer.Option("--controllers", help="on: run a runner candidate "
                                                                          "here (as --runner); off: "
                                                                          "API only (run `cca runner`).")
                           ] = None,
    leader_ttl: Annotated[float, typer.Option("--leader-ttl", min=1.0, help="The runner's leader lease "
                                                                            "seconds.")] = 10.0,
    rate: Annotated[float, typer.Option("--rate", help="Requests per second per caller.")] = 50.0,
    max_message: Annotated[int, typer.Option("--max-message-bytes", help="Largest request.")] = 4 << 20,
    cluster_cidr: Annotated[str | None, typer.Option("--cluster-cidr", help="Node subnets and instance "
                                                                            "addresses (default "
                                                                            "10.88.0.0/16).")] = None,
    service_cidr: Annotated[str | None, typer.Option(
        "--service-cidr", help="Service virtual IPs (default 10.96.0.0/16).")] = None,
    workers: Annotated[int, typer.Option("--workers", min=16, help="Threads for blocking streams (CLI "
                                                                  "watch, logs, exec) per listener; agents' "
                                                                  "slice watches, heartbeats and tunnels "
                                                                  "hold none.")] = 256,
    identity_ttl: Annotated[float, typer.Option("--identity-ttl", help="Seconds a workload identity "
                                                                       "(SPIFFE X.509-SVID) is valid; "
                                                                       "agents rotate at 2/3.")] = 3600.0,
    watch_max_bytes: Annotated[int, typer.Option("--watch-max-bytes", min=65536, help="Bytes queued for one "
                                                 "watch stream before a client that reads too slowly is "
                                                 "dropped (it resumes from its last revision).")
                               ] = 8 << 20,
    audit_keep: Annotated[int, typer.Option("--audit-keep", min=1, help="Audit records kept in the store "
                                            "(the newest).")] = 100_000,
    audit_max_age: Annotated[str | None, typer.Option("--audit-max-age", help="Drop audit records older "
                                                      "than this (e.g. 30d, 12h; default: no age limit).")
                             ] = None,
    audit_log_path: Annotated[Path | None, typer.Option("--audit-log-path", help="Also write every audit "
                                                        "record to this file as JSON lines (rotated).")
                              ] = None,
    audit_log_maxsize: Annotated[int, typer.Option("--audit-log-maxsize", min=1, help="Megabytes of the "
                                                   "audit log file before it is rotated.")] = 100,
    audit_log_maxbackup: Annotated[int, typer.Option("--audit-log-maxbackup", min=0, help="Rotated audit "
                                                     "log files kept (file.1 … file.N).")] = 5,
    policy_seconds: Annotated[float, typer.Option("--policy-seconds", min=0.1, help="Wall clock one "
                                                  "operator .lp policy may take grounding and solving "
                                                  "one request (then the request is refused).")] = 2.0,
    policy_memory: Annotated[int, typer.Option("--policy-memory-mib", min=128, help="Address space of each "
                                               "policy worker process (MiB).")] = 1024,
    policy_workers: Annotated[int, typer.Option("--policy-workers", min=1, help="Policy worker processes "
                                                "kept started.")] = 2,
    netpolicy_seconds: Annotated[float, typer.Option("--netpolicy-seconds", min=0.1, help="Wall clock of "
                                                     "one netpolicy solve with operator extensions (then "
                                                     "the firewall documents stay as they were).")] = 30.0,
    time_zone: Annotated[str, typer.Option("--time-zone", help="The cluster's time zone (autoscaling "
                                                               "schedule windows).")] = "UTC",
    rebalance_interval: Annotated[float, typer.Option("--rebalance-interval", min=0.0, help="Seconds "
                                                      "between rebalancing cycles (and after start-up "
                                                      "before the first); 0: no rebalancing.")] = 60.0,
) -> None:
    """Serve the API over TLS only (no plaintext port) and run the controllers (unless --controllers off)."""
    from ccattler.engine.api.server import ApiServer, ServerOptions
    from ccattler.engine.clientconfig import load_config
    from ccattler.engine.facts import CcaError
    from ccattler.engine.pki import ClusterFiles
    from ccattler.engine.store import open_store

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from ccattler.cli.runner import start_runner, store_url
    from ccattler.cli.token import parse_duration
    from ccattler.engine.clientconfig import server_list

    max_age = parse_duration(audit_max_age) if audit_max_age else 0.0  # refused before anything starts
    if controllers not in (None, "on", "off"):
        raise typer.BadParameter(f"{controllers!r}: expected on or off", param_hint="--controllers")
    runner = runner if controllers is None else controllers == "on"
    ctx = None if pki and listen and store else load_config().context(context)
    root = pki or (Path(ctx.cluster) if ctx and ctx.cluster else None)
    if root is None:
        raise CcaError("no cluster PKI for this context (run `cca init`, or pass --pki DIR)")
    # With several servers in the context, the first is this one unless --listen says otherwise.
    listen = listen or server_list(ctx.server)[0]  # type: ignore[union-attr]
    options = ServerOptions(listen=listen, token_listen=token_listen,
                            metrics_listen=None if metrics == "off" else metrics, rate=rate,
                            burst=max(1, int(rate * 2)), max_message_bytes=max_message, workers=workers,
                            identity_ttl=identity_ttl, watch_max_bytes=watch_max_bytes, audit_keep=audit_keep,
                            audit_max_age=max_age,
                            audit_log_path=str(audit_log_path) if audit_log_path else None,
                            audit_log_max_bytes=audit_log_maxsize << 20,
                            audit_log_backups=audit_log_maxbackup, policy_seconds=policy_seconds,
                            policy_memory_bytes=policy_memory << 20, policy_workers=policy_workers,
                            netpolicy_seconds=netpolicy_seconds)
    opened = open_store(store_url(store, context))
    api = ApiServer(opened, ClusterFiles(root), options).start()
    loop = None
    if runner:
        from ccattler.engine.runner import RunnerCollector

        loop = start_runner(opened, cluster_cidr=cluster_cidr, service_cidr=service_cidr,
                            time_zone=time_zone, leader_ttl=leader_ttl,
                            rebalance_interval=rebalance_interval)
        api.metrics.registry.register(RunnerCollector(loop))  # controller counters on /metrics
    typer.echo(f"serving mutual TLS on {api.listen}, bearer tokens on {api.token_listen}"
               + (f", metrics on http://{api.metrics_listen}/metrics" if options.metrics_listen else "")
               + (", runner candidate" if runner else ""), err=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    if loop is not None:
        loop.stop()
    api.stop(grace=2.0)
    opened.close()


def register(app: typer.Typer) -> None:
    app.command("server")(server)
