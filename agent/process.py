"""The agent process: a node's credentials (join with a token once, then its node certificate),
one `NodeAgent` per node it hosts (a real node, or many simulated ones), each an `AgentLoop` on its
own thread that renews the node certificate before it expires and carries on over a new
connection. `cca agent` turns its options into one `AgentOptions` and calls `run`.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ccattler.engine.facts import CcaError

log = logging.getLogger("ccattler.agent")

#: How often the certificate's remaining life is checked (renewal happens 8 h before expiry).
RENEW_CHECK_SECONDS = 600.0


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


def node_settings(node: str | None, document: Mapping[str, Any], server: str | None,
                  join: tuple[str | None, str | None], ca: Path | None, context: str | None) -> NodeSettings:
    """Join first when given a (token, token listener); otherwise find the node certificate. A
    node that joined before (its certificate still valid) does not spend the token again."""
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
    from ccattler.engine.pki import load_cert

    try:
        return load_cert(Path(cert or "").read_bytes()).not_valid_after_utc > dt.datetime.now(dt.UTC)
    except (OSError, ValueError, CcaError):
        return False


class NodeAgent:
    """One node's AgentLoop in a thread, with certificate renewal; `stop()` leaves containers running."""

    def __init__(self, settings: NodeSettings, core: Any, ttl: float, tick: float,
                 start_jitter: float = 0.0) -> None:
        from ccattler.agent.loop import AgentLoop
        from ccattler.engine.api.agent_client import AgentClient
        from ccattler.engine.api.client import Client

        self.settings, self.core = settings, core
        self._client = Client(settings.context, timeout=10)
        self.loop = AgentLoop(AgentClient(self._client), core, settings.document, ttl=ttl, tick=tick,
                              start_jitter=start_jitter)
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
        self.loop.reconnect(AgentClient(self._client))
        old.close()  # its streams end; the loop re-registers and re-watches on the new connection
        log.info("node %s: certificate renewed (valid until %s)", self.settings.name, expires)

    def stop(self, remove: bool = False) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
        self.core.shutdown(remove=remove)
        self._client.close()


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """What `cca agent` was asked for: the nodes to host and how to run them."""

    #: Node name ("" for this machine's: from the certificate or the host name) → its document.
    documents: Mapping[str, Mapping[str, Any]]
    runtime: str
    state_dir: Path
    server: str | None = None
    node_id: str | None = None
    token: str | None = None
    token_server: str | None = None
    ca: Path | None = None
    context: str | None = None
    bridge: str = "cca0"
    runc_root: Path | None = None
    ttl: float = 10.0
    tick: float = 1.0
    vxlan: tuple[int, int] = (42, 4789)  # VNI, UDP port
    cluster_cidr: str | None = None
    #: Seconds between reads of the gates' and the data plane's counters (`--metric-interval`).
    metric_interval: float = 10.0
    #: The first registration waits a random delay below this (`--start-jitter`): many agents
    #: started together (a rack's power-on, a fleet restart) then do not all register at once.
    start_jitter: float = 0.0
    #: `--dataplane` as asked: `auto` stays `auto` for the node's core (the document shows what
    #: `resolve_kind` guessed), so the core can still fall back when attaching fails.
    dataplane: str = "nftables"


def core_dataplane(document: Mapping[str, Any], requested: str) -> str:
    """The data plane kind a node's core makes: "memory" for a node without a network of its own
    (its document names no plane), `auto` as asked, else the plane its document names."""
    shown = document.get("dataplane")
    if not shown:
        return "memory"
    return "auto" if requested == "auto" else shown


def make_core(name: str, kind: str, state_dir: Path, bridge: str, runc_root: Path | None,
              overlay: tuple[str, int, int] | None = None, cluster_cidr: str | None = None,
              dataplane: str = "nftables", metric_interval: float = 10.0) -> Any:
    """A node's `NodeCore`. `overlay`: (underlay address, VNI, UDP port) of this node's VXLAN
    device, for runtimes with their own network."""
    from ccattler.agent.images.store import ImageStore
    from ccattler.agent.machine import make_runtime
    from ccattler.agent.net.overlay import Overlay, device_name
    from ccattler.agent.node import NodeCore

    runtime = make_runtime(kind, state_dir, ImageStore(state_dir), runc_root)
    vxlan = None
    if overlay and runtime.isolated_network:
        local, vni, port = overlay
        vxlan = Overlay(device_name(bridge), local, vni=vni, port=port)
    # container subnets reach each other unNATed: the receiver sees the sender's own address
    return NodeCore(name, runtime, state_dir=state_dir, bridge=bridge, overlay=vxlan,
                    no_masquerade=(cluster_cidr,) if cluster_cidr else (), dataplane=dataplane,
                    node_addresses=(overlay[0],) if overlay else (), metric_interval=metric_interval)


def start(options: AgentOptions) -> list[NodeAgent]:
    """Join or find each node's credentials, then start its loop (simulated nodes each in a state
    dir of their own under `state_dir`)."""
    if options.token and len(options.documents) > 1:
        raise CcaError("--token joins one node; join simulated nodes first (`cca up --simulate` does)")
    settings = [node_settings(name or options.node_id, doc, options.server,
                              (options.token, options.token_server), options.ca, options.context)
                for name, doc in options.documents.items()]
    own = options.documents.get("")
    overlay = (own["address"], *options.vxlan) if own is not None else None
    sim = options.runtime == "sim"
    return [NodeAgent(s, make_core(s.name, options.runtime, options.state_dir / s.name if sim
                                   else options.state_dir, options.bridge, options.runc_root, overlay,
                                   options.cluster_cidr, core_dataplane(s.document, options.dataplane),
                                   options.metric_interval),
                      options.ttl, options.tick, options.start_jitter).start()
            for s in settings]


def run(agents: list[NodeAgent], stop: threading.Event, renew_check: float = RENEW_CHECK_SECONDS) -> None:
    """Renew certificates as they come due until `stop`, then stop every node's loop."""
    while not stop.wait(renew_check):
        for one in agents:
            try:
                one.renew_if_due()
            except CcaError as exc:  # tried again at the next check; the old one is still valid
                log.warning("node %s: certificate renewal failed: %s", one.settings.name, exc)
    for one in agents:
        one.stop()
