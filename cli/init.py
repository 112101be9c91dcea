"""`cca init` (a new cluster's CA, server and admin certificates, master key and client context) and
`cca join` (a node enrols with a join token; its private key never leaves it)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer

from ccattler.cli._common import reports_errors


@reports_errors
def init(
    server: Annotated[str, typer.Option("--server", help="Address the API server will serve (HOST:PORT).")
                      ] = "127.0.0.1:7443",
    context: Annotated[str, typer.Option("--context", help="Name of the new context.")] = "default",
    host: Annotated[list[str] | None, typer.Option("--host", help="Extra DNS name or IP for the server "
                                                                  "certificate (repeatable).")] = None,
    etcd: Annotated[str | None, typer.Option("--etcd", help="The store: etcd members HOST:PORT,… (or a "
                                                            "whole etcd:// URL), kept in the context for "
                                                            "`cca server` and `cca runner`.")] = None,
    etcd_pki: Annotated[Path | None, typer.Option("--etcd-pki", help="Directory with ca.crt, client.crt and "
                                                                     "client.key for etcd's mutual TLS "
                                                                     "(deploy/etcd/cluster.sh: DIR/pki).")
                        ] = None,
) -> None:
    """Create a cluster: CA, server certificate, admin certificate (1 year), master key, context.

    `--server a,b,c` names several API servers (clients fail over between them; the server
    certificate covers every host); `--etcd` records the etcd cluster they share.
    """
    from ccattler.engine.clientconfig import Context, cca_home, save_context, server_list, token_address
    from ccattler.engine.pki import init_cluster, split_address

    home = cca_home()
    servers = server_list(server)
    if not servers:
        raise typer.BadParameter("give at least one HOST:PORT", param_hint="--server")
    hosts = tuple(dict.fromkeys([split_address(one)[0] for one in servers[1:]] + list(host or ())))
    store = _etcd_url(etcd, etcd_pki) if etcd else None
    files = init_cluster(home / "clusters" / context, servers[0], hosts)
    server = ",".join(servers)
    path = save_context(Context(name=context, server=server, token_server=token_address(server),
                                ca=str(files.ca_cert), cert=str(files.admin_cert), key=str(files.admin_key),
                                cluster=str(files.root), store=store))
    typer.echo(f"cluster created in {files.root}")
    typer.echo(f"  CA certificate     {files.ca_cert}")
    typer.echo(f"  server certificate {files.server_cert} (for {server})")
    typer.echo(f"  admin certificate  {files.admin_cert} (1 year)")
    typer.echo(f"  master key         {files.master_key} (0600; back it up: secrets need it)")
    typer.echo(f"context {context!r} written to {path} and made current")
    if store:
        typer.echo(f"store {store}")
        typer.echo("next: cca server --listen ADDRESS (one per --server address) and cca runner")
    else:
        typer.echo("next: cca server --store sqlite://" + str(home / "state.db"))


def _etcd_url(etcd: str, pki: Path | None) -> str:
    """The etcd store URL for `--etcd` (members or a URL) and `--etcd-pki`, checked by parsing."""
    from urllib.parse import quote

    from ccattler.engine.store.etcd_conn import parse_endpoints

    url = etcd if etcd.startswith("etcd://") else f"etcd://{etcd}"
    parse_endpoints(url, url.removeprefix("etcd://").partition("?")[0])
    if pki is not None:
        if "?" in url:
            raise typer.BadParameter("give --etcd-pki or certificate options in the URL, not both",
                                     param_hint="--etcd-pki")
        files = {name: (pki / f"{file}").resolve() for name, file in
                 (("ca", "ca.crt"), ("cert", "client.crt"), ("key", "client.key"))}
        missing = [str(path) for path in files.values() if not path.is_file()]
        if missing:
            raise typer.BadParameter(f"not found: {', '.join(missing)}", param_hint="--etcd-pki")
        url += "?" + "&".join(f"{name}={quote(str(path))}" for name, path in files.items())
    return url


@reports_errors
def join(
    server: Annotated[str, typer.Argument(help="The API server's HOST:PORT.")],
    token: Annotated[str, typer.Argument(help="A join token from `cca token create`.")],
    ca: Annotated[Path, typer.Option("--ca", exists=True, dir_okay=False,
                                     help="The cluster's CA certificate (ca.crt from the control plane).")],
    node: Annotated[str | None, typer.Option("--node", help="Node name (default: this host's name).")] = None,
    context: Annotated[str, typer.Option("--context", help="Name of the context to write.")] = "node",
    token_server: Annotated[str | None, typer.Option("--token-server", help="The server's bearer-token "
                                                     "listener (default: the port after SERVER).")] = None,
) -> None:
    """Enrol this machine as a node: send a CSR with the token, receive a 24 h node certificate."""
    from ccattler.engine.api.enroll import join_cluster
    from ccattler.engine.clientconfig import cca_home, save_context

    name = node or socket.gethostname().split(".")[0]
    joined = join_cluster(server, token, ca.resolve(), name, cca_home() / "nodes" / context, context,
                          token_server)
    save_context(joined)
    typer.echo(f"node {name} joined {server}; certificate {joined.cert} (24 h, renewed by the agent)")
    typer.echo(f"context {context!r} written and made current")


def register(app: typer.Typer) -> None:
    app.command("init")(init)
    app.command("join")(join)
