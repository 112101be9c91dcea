"""`cca server`: the API server (mutual-TLS and bearer-token listeners, metrics) and a runner
candidate running the default controllers, over one store."""

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
    store: Annotated[str, typer.Option("--store", help="sqlite:///abs/path.db or etcd://host:port[,…]")],
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
    rate: Annotated[float, typer.Option("--rate", help="Requests per second per caller.")] = 50.0,
    max_message: Annotated[int, typer.Option("--max-message-bytes", help="Largest request.")] = 4 << 20,
    cluster_cidr: Annotated[str | None, typer.Option("--cluster-cidr", help="Node subnets and instance "
                                                                            "addresses (default "
                                                                            "10.88.0.0/16).")] = None,
    service_cidr: Annotated[str | None, typer.Option(
        "--service-cidr", help="Service virtual IPs (default 10.96.0.0/16).")] = None,
    workers: Annotated[int, typer.Option("--workers", min=16, help="Threads per listener: one per open "
                                                                  "stream (an agent keeps one), so "
                                                                  "about nodes + 60.")] = 256,
    time_zone: Annotated[str, typer.Option("--time-zone", help="The cluster's time zone (autoscaling "
                                                               "schedule windows).")] = "UTC",
) -> None:
    """Serve the API over TLS only (no plaintext port) and run the controllers."""
    from ccattler.engine.api.server import ApiServer, ServerOptions
    from ccattler.engine.clientconfig import load_config
    from ccattler.engine.facts import CcaError
    from ccattler.engine.pki import ClusterFiles
    from ccattler.engine.store import open_store

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx = None if pki and listen else load_config().context(context)
    root = pki or (Path(ctx.cluster) if ctx and ctx.cluster else None)
    if root is None:
        raise CcaError("no cluster PKI for this context (run `cca init`, or pass --pki DIR)")
    options = ServerOptions(listen=listen or ctx.server, token_listen=token_listen,  # type: ignore[union-attr]
                            metrics_listen=None if metrics == "off" else metrics, rate=rate,
                            burst=max(1, int(rate * 2)), max_message_bytes=max_message, workers=workers)
    opened = open_store(store)
    api = ApiServer(opened, ClusterFiles(root), options).start()
    loop = None
    if runner:
        from ccattler.cli.autoscale import check_time_zone
        from ccattler.engine.controllers.registry import ControllerConfig, default_controllers
        from ccattler.engine.runner import Runner, RunnerCollector

        cidrs = {k: v for k, v in (("cluster_cidr", cluster_cidr), ("service_cidr", service_cidr)) if v}
        config = ControllerConfig(time_zone=check_time_zone(time_zone), **cidrs)
        loop = Runner(opened, default_controllers(config))
        api.metrics.registry.register(RunnerCollector(loop))  # controller counters on /metrics
        loop.start()
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
