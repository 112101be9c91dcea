"""`cca runner`: the controllers in a process of their own, talking to the store directly (the
control plane's side; agents and the CLI only ever talk to API servers). Any number may run: they
campaign for the `leader/runner` lease, one leads, the others wait and take over when it expires."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated, Any

import typer

from ccattler.cli._common import reports_errors


def store_url(store: str | None, context: str | None) -> str:
    """`--store`, or the context's (`cca init --etcd`), or a clear error."""
    if store:
        return store
    from ccattler.engine.clientconfig import load_config
    from ccattler.engine.facts import CcaError

    ctx = load_config().context(context)
    if not ctx.store:
        raise CcaError(f"no store for context {ctx.name!r}: pass --store URL "
                       "(or make the context with `cca init --etcd HOST:PORT,…`)")
    return ctx.store


def start_runner(opened: Any, *, cluster_cidr: str | None, service_cidr: str | None, time_zone: str,
                 identity: str | None = None, leader_ttl: float = 10.0,
                 rebalance_interval: float = 60.0) -> Any:
    """A started `Runner` with the default controllers over `opened` (campaigning for the lease)."""
    from ccattler.cli.autoscale import check_time_zone
    from ccattler.engine.controllers.registry import ControllerConfig, default_controllers
    from ccattler.engine.disruption.rebalance import RebalanceOptions
    from ccattler.engine.runner import Runner

    cidrs = {k: v for k, v in (("cluster_cidr", cluster_cidr), ("service_cidr", service_cidr)) if v}
    rebalance = RebalanceOptions(interval=rebalance_interval, grace=rebalance_interval,
                                 enabled=rebalance_interval > 0)
    config = ControllerConfig(time_zone=check_time_zone(time_zone), rebalance=rebalance, **cidrs)
    loop = Runner(opened, default_controllers(config), identity=identity, leader_ttl=leader_ttl)
    loop.start()
    return loop


@reports_errors
def runner(
    store: Annotated[str | None, typer.Option("--store", help="sqlite:///abs/path.db or etcd://host:port[,…] "
                                                              "(default: the context's).")] = None,
    context: Annotated[str | None, typer.Option("--context", help="Context whose store to use.")] = None,
    identity: Annotated[str | None, typer.Option("--identity", help="This runner's name in leader/runner "
                                                                    "(unique among live runners; "
                                                                    "default: host and a random tag).")
                        ] = None,
    leader_ttl: Annotated[float, typer.Option("--leader-ttl", min=1.0, help="Seconds of the leader lease: "
                                                                            "a dead leader is replaced "
                                                                            "after this.")] = 10.0,
    cluster_cidr: Annotated[str | None, typer.Option("--cluster-cidr", help="Node subnets and instance "
                                                                            "addresses (default "
                                                                            "10.88.0.0/16).")] = None,
    service_cidr: Annotated[str | None, typer.Option(
        "--service-cidr", help="Service virtual IPs (default 10.96.0.0/16).")] = None,
    time_zone: Annotated[str, typer.Option("--time-zone", help="The cluster's time zone (autoscaling "
                                                               "schedule windows).")] = "UTC",
    rebalance_interval: Annotated[float, typer.Option("--rebalance-interval", min=0.0, help="Seconds "
                                                      "between rebalancing cycles (and after start-up "
                                                      "before the first); 0: no rebalancing.")] = 60.0,
) -> None:
    """Run the controllers (leader-elected) against the store until SIGINT/SIGTERM."""
    from ccattler.engine.store import open_store

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    opened = open_store(store_url(store, context))
    loop = start_runner(opened, cluster_cidr=cluster_cidr, service_cidr=service_cidr, time_zone=time_zone,
                        identity=identity, leader_ttl=leader_ttl, rebalance_interval=rebalance_interval)
    typer.echo(f"runner {loop.identity} on {opened.url}: campaigning for leader/runner "
               f"(lease {leader_ttl:g} s)", err=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    loop.stop()
    opened.close()


def register(app: typer.Typer) -> None:
    app.command("runner")(runner)
