"""`cca up` / `cca down`: the embedded single-machine cluster in one command — `cca init` if needed,
`cca server` on `sqlite://$CCA_HOME/state.db` (API + runner) and a local agent (runc as root when
runc is installed, else plain processes) or simulated nodes; `cca down` stops it and leaves nothing."""

from __future__ import annotations

import signal
import socket
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from ccattler.cli._common import reports_errors
from ccattler.engine.facts import CcaError


@reports_errors
def up(
    detach: Annotated[bool, typer.Option("--detach", "-d", help="Return once ready; keep running in the "
                                                                "background (`cca down` stops it).")] = False,
    simulate: Annotated[Path | None, typer.Option("--simulate", help="Simulated nodes from the `node` blocks "
                                                                     "of this .cca file, no local agent.")
                        ] = None,
    nodes: Annotated[int | None, typer.Option("--sim-nodes", help="This many simulated nodes (sim-1…).")
                     ] = None,
    real_nodes: Annotated[int | None, typer.Option("--nodes", help="This many real nodes on this machine "
                                                                   "(runc, each in its own network "
                                                                   "namespace; root).")] = None,
    underlay: Annotated[str, typer.Option("--underlay", help="(--nodes) the nodes' private /24: the host "
                                                             "bridge has .1, node-1 .2, …")
                        ] = "10.213.0.0/24",
    server: Annotated[str, typer.Option("--server", help="Address for a new cluster (`cca init`).")
                      ] = "127.0.0.1:7443",
    context: Annotated[str, typer.Option("--context", help="The local cluster's context.")] = "default",
    runtime: Annotated[str | None, typer.Option("--runtime", help="runc or process (default: runc when "
                                                                  "root and runc exist).")] = None,
    state_dir: Annotated[Path | None, typer.Option("--state-dir", help="The node's state (default: "
                                                                       "CCA_STATE_DIR, /var/lib/ccattler "
                                                                       "as root).")] = None,
    bridge: Annotated[str, typer.Option("--bridge", help="The node bridge's name.")] = "cca0",
    runc_root: Annotated[Path | None, typer.Option("--runc-root", help="runc's state root.")] = None,
    cluster_cidr: Annotated[str | None, typer.Option("--cluster-cidr", help="Instance addresses "
                                                                            "(default 10.88.0.0/16).")
                                ] = None,
    service_cidr: Annotated[str | None, typer.Option(
        "--service-cidr", help="Service virtual IPs (default 10.96.0.0/16).")] = None,
    dataplane: Annotated[str, typer.Option("--dataplane", help="Every node's data plane for service VIPs "
                                                               "and network policy: nftables, ebpf or "
                                                               "auto.")] = "nftables",
    metrics: Annotated[str, typer.Option("--metrics", help="The server's /metrics address, or 'off'.")
                       ] = "127.0.0.1:9443",
    ttl: Annotated[float, typer.Option("--ttl", help="Node lease seconds.")] = 10.0,
    metric_interval: Annotated[float, typer.Option(
        "--metric-interval", help="Every agent's seconds between reads of the request/connection "
                                  "counters the autoscaler scales on (`cca agent --metric-interval`; "
                                  "10, at most 15).")] = 10.0,
    identity_ttl: Annotated[float | None, typer.Option("--identity-ttl", help="Seconds a workload "
                                                                              "identity is valid (the "
                                                                              "server's; 3600).")] = None,
    rebalance_interval: Annotated[float | None, typer.Option(
        "--rebalance-interval", min=0.0, help="Seconds between rebalancing cycles (the server's; 60, 0: off)."
    )] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for readiness.")] = 60.0,
) -> None:
    """Start the local cluster and return (--detach) or stay in the foreground once it is ready."""
    from ccattler.agent.machine import default_runtime_kind
    from ccattler.agent.paths import default_state_dir
    from ccattler.cli import localcluster as lc
    from ccattler.engine.clientconfig import cca_home, load_config

    home = cca_home().resolve()
    if lc.running_pid(home, "server"):
        typer.echo(f"already running (server pid {lc.running_pid(home, 'server')}, agent pid "
                   f"{lc.running_pid(home, 'agent') or 'none'}); `cca down` stops it")
        return
    if lc.Layout.load(home) is not None or lc.running_pid(home, "agent"):
        lc.down(home, lambda line: typer.echo(f"cleaning up a previous run: {line}"))
    if simulate and nodes:
        raise typer.BadParameter("give --simulate FILE or --sim-nodes N, not both")
    if real_nodes and (simulate or nodes):
        raise typer.BadParameter("give --nodes N (real) or --simulate/--sim-nodes, not both")
    sim = bool(simulate or nodes)
    from ccattler.agent.dataplane.factory import DATAPLANES

    if dataplane not in DATAPLANES[:3]:
        raise typer.BadParameter(f"{dataplane!r}: expected one of {', '.join(DATAPLANES[:3])}",
                                 param_hint="--dataplane")
    if not 0 < metric_interval <= 15:
        raise typer.BadParameter(f"{metric_interval:g}: expected more than 0 and at most 15 seconds",
                                 param_hint="--metric-interval")
    plan = None
    if real_nodes:
        from ccattler.cli.multinode import Underlay

        kind = runtime or "runc"
        if kind != "runc":
            raise typer.BadParameter(f"{kind!r}: --nodes runs runc nodes", param_hint="--runtime")
        plan = Underlay.plan(real_nodes, underlay)
        names = tuple(plan.nodes)
        # the server listens on the host bridge, which every node reaches over its veth
        server = f"{plan.host}:{server.rsplit(':', 1)[1]}"
    elif sim:
        from ccattler.cli.agent import simulated_nodes

        names = tuple(simulated_nodes(simulate.resolve() if simulate else None, nodes))
        kind = "sim"
    else:
        names = (socket.gethostname().split(".")[0],)
        kind = runtime or default_runtime_kind()
        if kind not in ("runc", "process"):
            raise typer.BadParameter(f"{kind!r}: expected runc or process (or --simulate)",
                                     param_hint="--runtime")
    admin = _context(context, server, load_config())
    state = (state_dir or default_state_dir()).resolve()
    if plan is not None and admin.server != server:
        raise CcaError(f"context {admin.name!r} serves {admin.server}, not the node bridge's {server}: "
                       "give --context NAME for a new cluster")
    layout = lc.Layout(admin.name, kind, str(state), bridge, str(runc_root.resolve()) if runc_root else None,
                       names, plan.to_json() if plan else None, dataplane, metric_interval)
    if plan is not None:
        layout.save(home)  # before anything exists, so a failure's `cca down` finds it all
        plan.create()
        from ccattler.cli.multinode import seed_images

        for name in names:
            seed_images(state, state / name)
    server_args = ["server", "--store", f"sqlite://{home}/state.db", "--context", admin.name,
                   "--metrics", metrics] + (["--cluster-cidr", cluster_cidr] if cluster_cidr else []) \
        + (["--service-cidr", service_cidr] if service_cidr else []) \
        + (["--identity-ttl", str(identity_ttl)] if identity_ttl else []) \
        + (["--rebalance-interval", str(rebalance_interval)] if rebalance_interval is not None else [])
    children = {"server": lc.spawn(home, "server", server_args)}
    try:
        layout.save(home)
        lc.wait_until(lambda: lc.server_answers(admin), f"the API server on {admin.server}", timeout,
                      children, home)
        lc.join_nodes(admin, names)
        cidr = ["--cluster-cidr", cluster_cidr] if cluster_cidr else []
        if plan is not None:
            for name in names:
                children[f"agent-{name}"] = lc.spawn(
                    home, f"agent-{name}", lc.node_agent_args(layout, name) + ["--ttl", str(ttl), "--context",
                                                                                f"node-{name}", *cidr],
                    prefix=plan.enter(name))
        else:
            children["agent"] = lc.spawn(home, "agent", _agent_args(layout, simulate, nodes, ttl) + cidr)
        lc.wait_until(lambda: lc.nodes_ready(admin, names), f"node {', '.join(names)} to be ready", timeout,
                      children, home)
    except BaseException:
        lc.down(home, lambda line: typer.echo(f"cleaning up: {line}", err=True))
        raise
    what = "simulated nodes" if sim else "nodes" if plan else "node"
    typer.echo(f"cluster ready: server {admin.server} (context {admin.name}), "
               f"{what} {', '.join(names)} ({kind}); logs in {home / 'logs'}")
    if detach:
        typer.echo("next: cca apply examples/hello.cca --wait; stop with: cca down")
        return
    typer.echo("running in the foreground; Ctrl-C (or `cca down`) stops it")
    _foreground(home, children)


def _context(name: str, server: str, config: Any) -> Any:
    """The local cluster's admin context, made with `cca init` when it does not exist yet."""
    if name not in config.contexts:
        import contextlib
        import io

        from ccattler.cli.init import init
        from ccattler.engine.clientconfig import load_config

        with contextlib.redirect_stdout(io.StringIO()):  # its "next: cca server …" is what up does
            init(server=server, context=name, host=None)
        config = load_config()
        typer.echo(f"new cluster {name!r} for {server} (cca init): {config.contexts[name].cluster}")
    ctx = config.contexts[name]
    if not ctx.cluster or not ctx.cert:
        raise CcaError(f"context {name!r} is not a cluster made here with `cca init` (no PKI); "
                       "`cca up --context NAME` makes a new local one")
    return ctx


def _agent_args(layout: Any, simulate: Path | None, nodes: int | None, ttl: float) -> list[str]:
    args = ["agent", "--runtime", layout.runtime, "--state-dir", layout.state_dir, "--bridge", layout.bridge,
            "--ttl", str(ttl), "--dataplane", layout.dataplane,
            "--metric-interval", str(layout.metric_interval)]
    if layout.runc_root:
        args += ["--runc-root", layout.runc_root]
    if simulate:
        return args + ["--simulate", str(simulate.resolve())]
    if nodes:
        return args + ["--sim-nodes", str(nodes)]
    return args + ["--context", f"node-{layout.nodes[0]}"]


def _foreground(home: Path, children: dict[str, Any]) -> None:
    """Until Ctrl-C/SIGTERM or a child exits (e.g. `cca down` elsewhere), then stop everything."""
    from ccattler.cli import localcluster as lc

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        exited = [name for name, child in children.items() if child.poll() is not None]
        if exited:
            typer.echo(f"{' and '.join(exited)} exited; stopping the cluster", err=True)
            break
    lc.down(home, typer.echo)


@reports_errors
def down() -> None:
    """Stop the local cluster: the agent, its containers and node network, then the server."""
    from ccattler.cli import localcluster as lc
    from ccattler.engine.clientconfig import cca_home

    if not lc.down(cca_home().resolve(), typer.echo):
        typer.echo("not running")


def register(app: typer.Typer) -> None:
    app.command("up")(up)
    app.command("down")(down)
