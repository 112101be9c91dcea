"""`cca image`: the node's local OCI image store — list, import, pull, rm, prune, build-busybox.

The store lives in the node state dir (`--state-dir`, `CCA_STATE_DIR`, default /var/lib/ccattler
for root).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

image_app = typer.Typer(help="The node's local OCI image store.", no_args_is_help=True)

StateDir = Annotated[
    Path | None,
    typer.Option("--state-dir", help="Node state dir (default: $CCA_STATE_DIR, /var/lib/ccattler as root)."),
]


def _store(state_dir: Path | None):  # noqa: ANN202 - lazy import keeps `cca --help` fast
    from ccattler.agent.images.store import ImageStore
    from ccattler.agent.paths import default_state_dir

    return ImageStore(state_dir or default_state_dir())


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


@image_app.command("list")
def list_images(
    state_dir: StateDir = None,
    output: Annotated[str, typer.Option("-o", "--output", help="table or json")] = "table",
) -> None:
    """List the images in the local store."""
    images = _store(state_dir).list()
    if output == "json":
        rows = [{"name": i.name, "digest": i.digest, "size": i.size} for i in images]
        typer.echo(json.dumps(rows, indent=2))
        return
    if output != "table":
        raise typer.BadParameter("expected table or json", param_hint="--output")
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for header in ("NAME", "DIGEST", "SIZE"):
        table.add_column(header)
    for image in images:
        table.add_row(image.name, image.digest[:19], _size(image.size))
    Console().print(table)


@image_app.command("import")
def import_image(
    file: Annotated[Path, typer.Argument(help="A tar: OCI layout (oci-archive) or docker-archive.")],
    name: Annotated[str | None, typer.Option("--name", help="Name the (single) image in the archive.")]
    = None,
    state_dir: StateDir = None,
) -> None:
    """Import images from a tar archive."""
    from ccattler.agent.images.archive import import_archive

    for imported in import_archive(_store(state_dir), file, name):
        typer.echo(f"imported {imported}")


@image_app.command("pull")
def pull_image(
    reference: Annotated[str, typer.Argument(help="[registry/]repository[:tag][@digest]")],
    insecure: Annotated[bool, typer.Option("--insecure", help="Plain HTTP (loopback registries fall back "
                                           "to it by themselves).")] = False,
    ca: Annotated[Path | None, typer.Option("--ca", help="CA bundle that signs the registry's certificate.")]
    = None,
    username: Annotated[str | None, typer.Option(
        "--username", help="Registry user; the password comes from CCA_REGISTRY_PASSWORD or stdin.")] = None,
    state_dir: StateDir = None,
) -> None:
    """Pull an image from an OCI/Docker registry."""
    from ccattler.agent.images.registry import Credentials, pull

    credentials = None
    if username:
        password = os.environ.get("CCA_REGISTRY_PASSWORD") or sys.stdin.readline().rstrip("\n")
        credentials = Credentials(username, password)
    image = pull(_store(state_dir), reference, insecure=insecure, credentials=credentials,
                 ca_file=str(ca) if ca else None)
    typer.echo(f"pulled {image.name} {image.digest}")


@image_app.command("rm")
def remove_image(
    name: Annotated[str, typer.Argument(help="The image name to remove.")],
    state_dir: StateDir = None,
) -> None:
    """Remove an image name from the store (and its unpacked rootfs when no name uses it)."""
    store = _store(state_dir)
    store.untag(name)
    store.prune_rootfs()
    typer.echo(f"removed {name}")


@image_app.command("prune")
def prune_images(state_dir: StateDir = None) -> None:
    """Delete blobs and unpacked root filesystems that no image name uses."""
    count, freed = _store(state_dir).prune()
    typer.echo(f"deleted {count} blobs, {_size(freed)}")


@image_app.command("build-busybox")
def build_busybox_image(
    binary: Annotated[Path, typer.Option("--binary", help="The static busybox to use.")]
    = Path("/bin/busybox"),
    name: Annotated[str, typer.Option("--name")] = "busybox:latest",
    state_dir: StateDir = None,
) -> None:
    """Build the busybox image from the host's busybox-static (run at install time)."""
    from ccattler.agent.images.busybox import build_busybox

    image = build_busybox(_store(state_dir), name, binary)
    typer.echo(f"built {image.name} {image.digest}")


def register(app: typer.Typer) -> None:
    app.add_typer(image_app, name="image")
