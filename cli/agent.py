"""`cca agent`: a node's agent process — joins (or uses its node certificate), registers its node,
heartbeats, watches its slice, reconciles containers and reports, renews its certificate, and on
SIGTERM stops cleanly leaving its containers running (like kubelet; `cca down` removes them).

`--runtime sim --simulate FILE` (or `--sim-nodes N`) hosts many simulated nodes in this one process.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from ccattler.cli._common import reports_errors
from ccattler.engine.facts import CcaError

log = logging.getLogger("ccattler.agent")

#: How often the certificate's remaining life is checked (renewal happens 8 h before expiry).
RENEW_CHECK_SECONDS = 600.0
#: A simulated node without a `capacity` block, and the nodes of `--sim-nodes N`.
SIM_CAPACITY = {"cpu": 4000, "memory": 8 << 30}


def node_context_name(node: str) -> str:
    return f"node-{node}"


def join_node(server: str, token: str, ca: Path, node: str, token_server: str | None = None) -> Any:
    """Join as `node` with a join token and save its context `node-<node>` (not made current)."""
    from ccattler.engine.api.enroll import join_cluster
    from ccattler.engine.clientconfig import cca_home, save_context

    name = node_context_name(node)
    joined = join_cluster(server, token, ca, node, cca_home() / "nodes" / name, name, token_server)
    save_context(joined, make_current=False)
    return joined


def node_context(node: str | None, context: str | None, server: str | None) -> Any:
    """The context holding this node's certificate: `--context`, else `node-<node>`, else `node`
    (what `cca join` writes); `server` overrides its address."""
    from ccattler.engine.clientconfig import load_config, token_address

    config = load_config()
    names = [context] if context else ([node_context_name(node)] if node else []) + ["node"]
    found = next((config.contexts[n] for n in names if n in config.contexts), None)
    if found is None or not found.cert:
        raise CcaError(f"no node certificate (looked for context {' or '.join(map(repr, names))}): "
                       "run `cca join SERVER TOKEN --ca ca.crt` first, or pass --token TOKEN")
    if server:
        found = replace(found, server=server, token_server=token_address(server))
    return found


def certificate_node(context: Any) -> str:
    """The node name a node certificate was issued to (the file is `<node>.crt`)."""
    return Path(context.cert).stem


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """How to run one node: its name, credentials and the document it registers with."""

    name: str
    context: Any
    document: dict[str, Any]


class NodeAgent:
    """One node's AgentLoop in a thread, with certificate renewal; `stop()` leaves containers running."""

    def __init__(self, settings: NodeSettings, core: Any, ttl: float, tick: float) -> None:
        from ccattler.agent.loop import AgentLoop
        from ccattler.engine.api.agent_client import AgentClient
        from ccattler.engine.api.client import Client

        self.settings, self.core = settings, core
        self._client = Client(settings.context, timeout=10)
        self.loop = AgentLoop(AgentClient(self._client), core, settings.document, ttl=ttl, tick=tick)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.loop.run, args=(self._stop,),
                                        name=f"cca-agent-{settings.name}", daemon=True)

    def start(self) -> NodeAgent:
        self._thread.start()
        return self

    def renew_if_due(self) -> None:
        """Renew the node certificate when it is close to expiry, then reconnect with the new one."""
        from ccattler.engine.api.agent_client import AgentClient
        from ccattler.engine.api.client import Client
        from ccattler.engine.api.enroll import needs_renewal, renew_certificate

        if not needs_renewal(self.settings.context):
            return
        expires = renew_certificate(self.settings.context)
        old, self._client = self._client, Client(self.settings.context, timeout=10)
        self.loop.client = AgentClient(self._client)
        self.core.secret_source = self.loop.client.fetch_secrets
        self.core.secret_batch_source = self.loop.client.fetch_secrets_many
        old.close()  # its streams end; the loop re-registers and re-watches on the new connection
        log.info("node %s: certificate renewed (valid until %s)", self.settings.name, expires)

    def stop(self, remove: bool = False) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
        self.core.shutdown(remove=remove)
        self._client.close()


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
    from ccattler.agent.node import node_document

    if file is None:
        return {f"sim-{i}": node_document(capacity=SIM_CAPACITY, address="127.0.0.1")
                for i in range(1, (count or 3) + 1)}
    from ccattler.dsl import compile_sources, load_sources

    facts = compile_sources(load_sources([file]))
    nodes = {key.split("/")[2]: doc for key, doc in facts.items() if key.startswith("desired/node/")}
    if not nodes:
        raise CcaError(f"{file}: no `node` blocks to simulate")
    return {name: node_document(capacity=doc.get("capacity") or SIM_CAPACITY, labels=doc.get("labels"),
                                zone=doc.get("zone"), restrictions=tuple(doc.get("restrictions") or ()),
                                architecture=doc.get("architecture"), address="127.0.0.1")
            for name, doc in sorted(nodes.items())}


def _core(name: str, kind: str, state_dir: Path, bridge: str, runc_root: Path | None,
          overlay: tuple[str, int, int] | None = None, cluster_cidr: str | None = None,
          dataplane: str = "nftables") -> Any:
    """`overlay`: (underlay address, VNI, UDP port) of this node's VXLAN device, for isolated runtimes."""
    from ccattler.agent.images.store import ImageStore
    from ccattler.agent.net.overlay import Overlay, device_name
    from ccattler.agent.node import NodeCore, make_runtime

    runtime = make_runtime(kind, state_dir, ImageStore(state_dir), runc_root)
    vxlan = None
    if overlay and runtime.isolated_network:
        local, vni, port = overlay
        vxlan = Overlay(device_name(bridge), local, vni=vni, port=port)
    # container subnets reach each other unNATed: the receiver sees the sender's own address
    return NodeCore(name, runtime, state_dir=state_dir, bridge=bridge, overlay=vxlan,
                    no_masquerade=(cluster_cidr,) if cluster_cidr else (), dataplane=dataplane,
                    node_addresses=(overlay[0],) if overlay else ())


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
    cleanup: Annotated[bool, typer.Option("--cleanup", help="Remove every container and the node network "
                                                            "of this state dir, then exit (agent stopped).")
                       ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Print the runtime's view of this state dir "
                                                        "(containers, pids, usage, log sizes) as JSON, "
                                                        "then exit.")] = False,
) -> None:
    """Run a node agent until SIGTERM/SIGINT (its containers keep running after it stops)."""
    from ccattler.agent.dataplane.factory import DATAPLANES
    from ccattler.agent.node import RUNTIMES, default_runtime_kind, node_document
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
    state = (state_dir or default_state_dir()).resolve()
    if debug or action == "debug":
        import json

        from ccattler.agent.debug import node_report
        from ccattler.agent.images.store import ImageStore
        from ccattler.agent.node import make_runtime

        typer.echo(json.dumps(node_report(make_runtime(kind, state, ImageStore(state), runc_root)), indent=2))
        return
    if cleanup:
        from ccattler.agent.node import cleanup_node

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
    if token and len(documents) > 1:
        raise CcaError("--token joins one node; join simulated nodes first (`cca up --simulate` does)")
    settings = [_settings(name or node_id, doc, server, (token, token_server), ca, context)
                for name, doc in documents.items()]
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    overlay = (documents[""]["address"], vxlan_vni, vxlan_port) if "" in documents else None
    agents = [NodeAgent(s, _core(s.name, kind, state / s.name if kind == "sim" else state, bridge, runc_root,
                                 overlay, cluster_cidr, s.document.get("dataplane") or "memory"), ttl,
                                 tick).start() for s in settings]
    typer.echo(f"agent: {len(agents)} node(s) ({', '.join(s.name for s in settings)}), runtime {kind}, "
               f"server {settings[0].context.server}, state {state}", err=True)
    while not stop.wait(RENEW_CHECK_SECONDS):
        for one in agents:
            try:
                one.renew_if_due()
            except CcaError as exc:  # tried again at the next check; the old one is still valid
                log.warning("node %s: certificate renewal failed: %s", one.settings.name, exc)
    for one in agents:
        one.stop()
    typer.echo("agent stopped; its containers keep running (`cca down` or `cca agent --cleanup` removes them)"
               if kind != "sim" else "agent stopped", err=True)


def _resolved_dataplane(kind: str, runtime: str, state: Path, runc_root: Path | None) -> str | None:
    """The data plane this node will run (`auto` decided here, so the node document says which);
    None for runtimes without their own network (no VIPs or policy to program)."""
    if runtime != "runc":
        return None
    from ccattler.agent.dataplane.factory import resolve_kind
    from ccattler.agent.runtime.runc import cgroup_token

    return resolve_kind(kind, f"ccattler/{cgroup_token(runc_root or Path('/run/ccattler/runc'))}")


def _settings(node: str | None, document: Mapping[str, Any], server: str | None,
              join: tuple[str | None, str | None], ca: Path | None, context: str | None) -> NodeSettings:
    """Join first when given a (token, token listener); otherwise find the node certificate."""
    token, token_server = join
    if token:
        from ccattler.engine.clientconfig import load_config

        name = node or socket.gethostname().split(".")[0]
        joined = load_config().contexts.get(node_context_name(name))
        if joined and _still_valid(joined.cert):
            log.info("node %s joined before (context %s); the token is not used", name, joined.name)
            return NodeSettings(name, node_context(name, joined.name, server), dict(document))
        current = None if (ca and server) else load_config().context(None)
        address = server or current.server  # type: ignore[union-attr]
        ca_file = (ca or Path(current.ca)).resolve()  # type: ignore[union-attr]
        ctx = join_node(address, token, ca_file, name, token_server)
        return NodeSettings(name, ctx, dict(document))
    ctx = node_context(node, context, server)
    name = certificate_node(ctx)
    if node and node != name:
        raise CcaError(f"the certificate in context {ctx.name!r} is for node {name!r}, not {node!r}")
    return NodeSettings(name, ctx, dict(document))


def _still_valid(cert: str | None) -> bool:
    import datetime as dt

    from ccattler.engine.pki import load_cert

    try:
        return load_cert(Path(cert or "").read_bytes()).not_valid_after_utc > dt.datetime.now(dt.UTC)
    except (OSError, ValueError, CcaError):
        return False


def register(app: typer.Typer) -> None:
    app.command("agent")(agent)
