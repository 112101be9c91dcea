"""Image references (`[registry/]repository[:tag][@digest]`): parsing and the local name they get.

A reference without a registry host is a local name (`busybox` → `busybox:latest`); pulling such a
name goes to Docker Hub (`registry-1.docker.io`, `library/` for single-segment names). As in Docker,
`docker.io/library/busybox` and `busybox` are the same name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ccattler.engine.facts import CcaError


class InvalidReference(CcaError, ValueError):
    """An image reference is malformed."""


DOCKER_HUB = "registry-1.docker.io"
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", DOCKER_HUB})
_REPO = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*\Z")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")


@dataclass(frozen=True, slots=True)
class Reference:
    """A parsed reference; `registry` is None for a local name."""

    registry: str | None
    repository: str
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        """The canonical local name: `[registry/]repository:tag` or `…@digest`."""
        base = f"{self.registry}/{self.repository}" if self.registry else self.repository
        if self.digest:
            return f"{base}@{self.digest}"
        return f"{base}:{self.tag or 'latest'}"

    @property
    def remote(self) -> tuple[str, str]:
        """(registry host, repository path) to pull from."""
        if self.registry:
            return self.registry, self.repository
        repo = self.repository if "/" in self.repository else f"library/{self.repository}"
        return DOCKER_HUB, repo

    @property
    def version(self) -> str:
        """What the registry's manifest endpoint takes: the digest, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        return self.name


def _looks_like_host(part: str) -> bool:
    return "." in part or ":" in part or part == "localhost"


def parse_reference(text: str) -> Reference:
    """Parse `text`, raising `InvalidReference` with the reason."""
    if not text or text != text.strip():
        raise InvalidReference(f"image reference {text!r} is empty or has surrounding spaces")
    rest, digest = text, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST.match(digest):
            raise InvalidReference(f"image reference {text!r}: digest must be sha256:<64 hex>")
    registry = None
    first, _, remainder = rest.partition("/")
    if remainder and _looks_like_host(first):
        registry, rest = first, remainder
    tag = None
    last_slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > last_slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
        if not _TAG.match(tag):
            raise InvalidReference(f"image reference {text!r}: tag {tag!r} is not valid")
    if not _REPO.match(rest):
        raise InvalidReference(
            f"image reference {text!r}: repository {rest!r} must be lowercase letters, digits, "
            "and . _ - separators"
        )
    if registry in _HUB_ALIASES:
        registry = None
        if rest.startswith("library/") and rest.count("/") == 1:
            rest = rest[len("library/"):]
    return Reference(registry, rest, tag, digest)
