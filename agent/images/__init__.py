"""The node's local OCI image store: names and blobs, root filesystems, import, pull, busybox."""

from ccattler.agent.images.archive import import_archive
from ccattler.agent.images.busybox import build_busybox
from ccattler.agent.images.refs import InvalidReference, Reference, parse_reference
from ccattler.agent.images.registry import Credentials, RegistryError, pull
from ccattler.agent.images.store import Image, ImageError, ImageNotFound, ImageStore

__all__ = [
    "Credentials",
    "Image",
    "ImageError",
    "ImageNotFound",
    "ImageStore",
    "InvalidReference",
    "Reference",
    "RegistryError",
    "build_busybox",
    "import_archive",
    "parse_reference",
    "pull",
]
