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
) -> None:
    """Create a cluster: CA, server certificate, admin certificate (1 year), master key, context."""
    from ccattler.engine.clientconfig import Context, cca_home, save_context, token_address
    from ccattler.engine.pki import init_cluster

    home = cca_home()
    files = init_cluster(home / "clusters" / context, server, tuple(host or ()))
    path = save_context(Context(name=context, server=server, token_server=token_address(server),
                                ca=str(files.ca_cert), cert=str(files.admin_cert), key=str(files.admin_key),
                                cluster=str(files.root)))
    typer.echo(f"cluster created in {files.root}")
    typer.echo(f"  CA certificate     {files.ca_cert}")
    typer.echo(f"  server certificate {files.server_cert} (for {server})")
    typer.echo(f"  admin certificate  {files.admin_cert} (1 year)")
    typer.echo(f"  master key         {files.master_key} (0600; back it up: secrets need it)")
    typer.echo(f"context {context!r} written to {path} and made current")
    typer.echo("next: cca server --store sqlite://" + str(home / "state.db"))


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
