"""`cca agent`: a node's agent process — joins (or uses its node certificate), registers its node,
heartbeats, watches its slice, reconciles containers and reports, renews its certificate, and on
SIGTERM stops cleanly leaving its containers running (like kubelet; `cca down` removes them).

`--runtime sim --simulate FILE` (or `--sim-nodes N`) hosts many simulated nodes in this one process.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from ccattler.cli._common import reports_errors
from ccattler.engine.facts import CcaError
from ccattler.engine.facts.keys import DESIRED_NODES

#: A simulated node without a `capacity` block, and the nodes of `--sim-nodes N`.
SIM_CAPACITY = {"cpu": 4000, "memory": 8 << 30}


def _labels(items: list[str] | None) -> dict[str, str]:
    labels = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--label {item!r} must be KEY=VALUE")
        labels[key] = value
    return labels


def simulated_nodes(file: Path | None, count: int | None) -> dict[str, dict[str, Any]]:
    """Node name → registration document for every `node` block of `file` (or `sim-1`…`sim-N`)."""
    from ccattler.agent.machine import node_document

    if file is None:
        return {f"sim-{i}": node_document(capacity=SIM_CAPACITY, address="127.0.0.1")
                for i in range(1, (count or 3) + 1)}
    from ccattler.dsl import compile_sources, load_sources

    facts = compile_sources(load_sources([file]))
    nodes = {key.split("/")[2]: doc for key, doc in facts.items() if key.startswith(DESIRED_NODES)}
    if not nodes:
        raise CcaError(f"{file}: no `node` blocks to simulate")
    return {name: node_document(capacity=doc.get("capacity") or SIM_CAPACITY, labels=doc.get("labels"),
                                zone=doc.get("zone"), restrictions=tuple(doc.get("restrictions") or ()),
                                architecture=doc.get("architecture"), address="127.0.0.1")
            for name, doc in sorted(nodes.items())}


@reports_errors
def agent(
    action: Annotated[str | None, typer.Argument(metavar="[debug]", help="`debug`: the same as --debug.")
                      ] = None,
    server: Annotated[str | None, typer.Option("--server", help="API server HOST:PORT (mutual TLS; default: "
                                                                "the node context's).")] = None,
    node_id: Annotated[str | None, typer.Option("--node-id", help="Node name (default: the certificate's, "
                                                                  "or this host's name).")] = None,
    zone: Annotated[str | None, typer.Option("--zone", help="Zone this node is in.")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", help="KEY=VALUE (repeatable).")] = None,
    restrict: Annotated[list[str] | None, typer.Option("--restrict", help="Only services that accept "
                                                                          "this (repeatable).")] = None,
    runtime: Annotated[str | None, typer.Option("--runtime", help="runc, process or sim (default: runc "
                                                                  "when root and runc exist, else process).")
                       ] = None,
    state_dir: Annotated[Path | None, typer.Option("--state-dir", help="Images, bundles, network records "
                                                                       "(default: CCA_STATE_DIR, "
                                                                       "/var/lib/ccattler as root).")] = None,
    token: Annotated[str | None, typer.Option("--token", help="Join with this join token first (the "
                                                              "certificate is kept in $CCA_HOME).")] = None,
    token_server: Annotated[str | None, typer.Option("--token-server", help="The server's join listener "
                                                                            "(default: the port after "
                                                                            "--server).")] = None,
    ca: Annotated[Path | None, typer.Option("--ca", help="The cluster's CA certificate, to join with "
                                                         "--token (default: the current context's).")] = None,
    context: Annotated[str | None, typer.Option("--context", help="Context with the node "
                                                                  "certificate (default: node-NAME, node).")
                       ] = None,
    bridge: Annotated[str, typer.Option("--bridge", help="The node bridge's name.")] = "cca0",
    runc_root: Annotated[Path | None, typer.Option("--runc-root", help="runc's state root "
                                                                       "(default /run/ccattler/runc).")
                            ] = None,
    ttl: Annotated[float, typer.Option("--ttl", help="Node lease seconds (down after this without a "
                                                     "heartbeat).")] = 10.0,
    tick: Annotated[float, typer.Option("--tick", help="Seconds between periodic reconciles.")] = 1.0,
    simulate: Annotated[Path | None, typer.Option("--simulate", help="(sim) one node per `node` block of "
                                                                     "this .cca file.")] = None,
    nodes: Annotated[int | None, typer.Option("--sim-nodes", help="(sim) this many default nodes.")] = None,
    vxlan_vni: Annotated[int, typer.Option("--vxlan-vni", help="The overlay's VXLAN network id.")] = 42,
    vxlan_port: Annotated[int, typer.Option("--vxlan-port", help="The overlay's VXLAN UDP port.")] = 4789,
    cluster_cidr: Annotated[str, typer.Option("--cluster-cidr", help="Instance addresses cluster-wide "
                                                                     "(not masqueraded between nodes).")
                            ] = "10.88.0.0/16",
    dataplane: Annotated[str, typer.Option("--dataplane", help="What programs service VIPs and network "
                                                               "policy: nftables, ebpf (socket LB and "
                                                               "policy in BPF maps) or auto (ebpf where "
                                                               "it loads).")] = "nftables",
    metric_interval: Annotated[float, typer.Option("--metric-interval", help="Seconds between reads of "
                                                   "the gates' request counters and the data plane's "
                                                   "connection counters (requests/s samples for the "
                                                   "autoscaler; at most 15).")] = 10.0,
    start_jitter: Annotated[float, typer.Option("--start-jitter", help="Wait a random delay below this many "
                                                "seconds before the first registration (many agents "
                                                "started at once: a fleet restart).")] = 0.0,
    cleanup: Annotated[bool, typer.Option("--cleanup", help="Remove every container and the node network "
                                                            "of this state dir, then exit (agent stopped).")
                       ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Print the runtime's view of this state dir "
                                                        "(containers, pids, usage, log sizes) as JSON, "
                                                        "then exit.")] = False,
) -> None:
    """Run a node agent until SIGTERM/SIGINT (its containers keep running after it stops)."""
    from ccattler.agent.dataplane.factory import DATAPLANES
    from ccattler.agent.machine import RUNTIMES, default_runtime_kind, node_document
    from ccattler.agent.paths import default_state_dir

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kind = runtime or ("sim" if simulate or nodes else default_runtime_kind())
    if kind not in RUNTIMES:
        raise typer.BadParameter(f"{kind!r} is not one of {', '.join(RUNTIMES)}", param_hint="--runtime")
    if (simulate or nodes) and kind != "sim":
        raise typer.BadParameter("--simulate/--sim-nodes need --runtime sim", param_hint="--runtime")
    try:
        import ipaddress

        ipaddress.IPv4Network(cluster_cidr)
    except ValueError as exc:
        raise typer.BadParameter(f"{cluster_cidr!r}: {exc}", param_hint="--cluster-cidr") from None
    if action not in (None, "debug"):
        raise typer.BadParameter(f"{action!r}: the only action is `debug` (or run the agent without one)",
                                 param_hint="ACTION")
    if dataplane not in DATAPLANES:
        raise typer.BadParameter(f"{dataplane!r} is not one of {', '.join(DATAPLANES)}",
                                 param_hint="--dataplane")
    if not 0 < metric_interval <= 15:
        raise typer.BadParameter(f"{metric_interval:g}: expected more than 0 and at most 15 seconds (the "
                                 "autoscaler counts a sample older than 45 s as missing)",
                                 param_hint="--metric-interval")
    if not 0 <= start_jitter <= 300:
        raise typer.BadParameter(f"{start_jitter:g}: expected 0 to 300 seconds", param_hint="--start-jitter")
    state = (state_dir or default_state_dir()).resolve()
    if debug or action == "debug":
        import json

        report = _debug_report(kind, state, runc_root, explicit=state_dir is not None)
        typer.echo(json.dumps(report, indent=2))
        return
    if cleanup:
        from ccattler.agent.machine import cleanup_node

        problems = cleanup_node(state, kind, bridge, runc_root)
        for problem in problems:
            typer.echo(f"could not remove: {problem}", err=True)
        if problems:
            raise typer.Exit(1)
        typer.echo(f"removed the containers and node network of {state} ({kind})")
        return
    if simulate or nodes:
        documents = simulated_nodes(simulate, nodes)
    else:
        capacity = SIM_CAPACITY if kind == "sim" else None
        plane = _resolved_dataplane(dataplane, kind, state, runc_root)
        documents = {"": node_document(capacity=capacity, labels=_labels(label), zone=zone,
                                       restrictions=tuple(restrict or ()), dataplane=plane)}
    from ccattler.agent import process

    agents = process.start(process.AgentOptions(
        documents=documents, runtime=kind, state_dir=state, server=server, node_id=node_id, token=token,
        token_server=token_server, ca=ca, context=context, bridge=bridge, runc_root=runc_root, ttl=ttl,
        tick=tick, vxlan=(vxlan_vni, vxlan_port), cluster_cidr=cluster_cidr, metric_interval=metric_interval,
        start_jitter=start_jitter, dataplane=dataplane))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    typer.echo(f"agent: {len(agents)} node(s) ({', '.join(a.settings.name for a in agents)}), runtime "
               f"{kind}, server {agents[0].settings.context.server}, state {state}", err=True)
    process.run(agents, stop)
    typer.echo("agent stopped; its containers keep running (`cca down` or `cca agent --cleanup` removes them)"
               if kind != "sim" else "agent stopped", err=True)


def _debug_report(kind: str, state: Path, runc_root: Path | None, explicit: bool) -> dict:
    """`cca agent debug`: the runtime's view of `state` (agent/debug.py). A state dir that is not
    one, or that no agent has used (nothing is created for a look), is an error saying so."""
    from ccattler.agent.debug import node_report
    from ccattler.agent.images.store import ImageStore
    from ccattler.agent.machine import make_runtime

    where = "--state-dir" if explicit else "the state dir (CCA_STATE_DIR, or the default)"
    if kind != "sim":  # the sim runtime keeps nothing on disk
        if state.exists() and not state.is_dir():
            raise typer.BadParameter(f"{state} is not a directory", param_hint="--state-dir")
        if not state.exists():
            raise CcaError(f"no agent state at {state}: no agent has run with this state dir (check {where}, "
                           "and --runtime)")
    try:
        images = ImageStore(state) if kind == "runc" else None
        return node_report(make_runtime(kind, state, images, runc_root))  # type: ignore[arg-type]
    except OSError as exc:
        raise CcaError(f"cannot read the agent state at {state}: {exc.strerror or exc}"
                       f"{' (run as root?)' if isinstance(exc, PermissionError) else ''}") from None


def _resolved_dataplane(kind: str, runtime: str, state: Path, runc_root: Path | None) -> str | None:
    """The data plane this node will run (`auto` decided here, so the node document says which);
    None for runtimes without their own network (no VIPs or policy to program)."""
    if runtime != "runc":
        return None
    from ccattler.agent.dataplane.factory import resolve_kind
    from ccattler.agent.runtime.runc import cgroup_token

    return resolve_kind(kind, f"ccattler/{cgroup_token(runc_root or Path('/run/ccattler/runc'))}")


def register(app: typer.Typer) -> None:
    app.command("agent")(agent)
