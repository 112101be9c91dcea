"""Pulling images from an OCI/Docker registry with the distribution API (`/v2/`): manifests (an
index or manifest list resolves to linux/<this arch>), then blobs, every digest verified.

Auth: a `401` with a Bearer challenge fetches a token from the realm it names (with basic
credentials when given); a Basic challenge uses the credentials directly. HTTPS, verified against
the system CAs or `ca_file`; loopback registries fall back to plain HTTP when HTTPS fails (as
Docker does, but never when the certificate is untrusted), and `insecure=True` uses plain HTTP.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from ccattler.agent.images.platform import choose_manifest
from ccattler.agent.images.refs import parse_reference
from ccattler.agent.images.store import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    IMAGE_MANIFESTS,
    INDEX_TYPES,
    OCI_INDEX,
    OCI_MANIFEST,
    Image,
    ImageError,
    ImageStore,
)


class RegistryError(ImageError):
    """The registry refused or could not be reached (the message has its status and reason)."""

    retriable = True

    def __init__(self, message: str, unreachable: bool = False):
        super().__init__(message)
        self.unreachable = unreachable


_ACCEPT = ", ".join([OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST])
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True, slots=True)
class Credentials:
    username: str
    password: str

    def basic(self) -> str:
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


def _is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0].strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class RegistryClient:
    """One registry host; remembers the Bearer token it was given."""

    def __init__(self, host: str, *, insecure: bool = False, credentials: Credentials | None = None,
                 ca_file: str | None = None, timeout: float = 30.0):
        self.base = f"{'http' if insecure else 'https'}://{host}"
        self._fallback = not insecure and _is_loopback(host)  # try http once if https fails
        self.host, self.credentials, self.timeout = host, credentials, timeout
        self._auth: str | None = None
        proxies = {} if _is_loopback(host) else None  # None: the environment's http(s)_proxy
        context = ssl.create_default_context(cafile=ca_file)
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies),
                                                   urllib.request.HTTPSHandler(context=context))

    def get(self, path: str, accept: str | None = None) -> Any:
        """GET `path` (a response object to read), answering one auth challenge if asked."""
        try:
            return self._get(path, accept)
        except RegistryError as exc:
            if not (self._fallback and exc.unreachable):
                raise
        self.base, self._fallback = f"http://{self.host}", False
        return self._get(path, accept)

    def _get(self, path: str, accept: str | None) -> Any:
        for attempt in range(2):
            request = urllib.request.Request(self.base + path)
            if accept:
                request.add_header("Accept", accept)
            if self._auth:
                request.add_header("Authorization", self._auth)
            try:
                return self._opener.open(request, timeout=self.timeout)
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and attempt == 0:
                    self._answer(exc.headers.get("WWW-Authenticate", ""))
                    continue
                raise RegistryError(f"{self.host}{path}: HTTP {exc.code} {_registry_message(exc)}") from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                untrusted = isinstance(reason, ssl.SSLCertVerificationError)  # never downgrade on that
                raise RegistryError(f"cannot reach registry {self.base}: {reason}",
                                    unreachable=not untrusted) from None
        raise RegistryError(f"{self.host}{path}: still unauthorized after authenticating")

    def _answer(self, challenge: str) -> None:
        scheme, _, params = challenge.partition(" ")
        fields = dict(_CHALLENGE.findall(params))
        if scheme.lower() == "basic":
            if not self.credentials:
                raise RegistryError(f"registry {self.host} needs credentials (--username)")
            self._auth = self.credentials.basic()
            return
        if scheme.lower() != "bearer" or "realm" not in fields:
            raise RegistryError(f"registry {self.host} sent an auth challenge this client cannot answer: "
                                f"{challenge!r}")
        query = urllib.parse.urlencode({k: v for k, v in fields.items() if k in ("service", "scope")})
        request = urllib.request.Request(f"{fields['realm']}?{query}")
        if self.credentials:
            request.add_header("Authorization", self.credentials.basic())
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                body = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RegistryError(f"token request to {fields['realm']} failed: {exc}") from None
        token = body.get("token") or body.get("access_token")
        if not token:
            raise RegistryError(f"token service {fields['realm']} returned no token")
        self._auth = f"Bearer {token}"


def _registry_message(exc: urllib.error.HTTPError) -> str:
    try:
        errors = json.loads(exc.read()).get("errors") or []
        return "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors) or exc.reason
    except (ValueError, OSError, AttributeError):
        return str(exc.reason)


def _fetch_manifest(client: RegistryClient, repo: str, version: str) -> tuple[bytes, str, str]:
    """(body, media type, verified digest) of a manifest."""
    with client.get(f"/v2/{repo}/manifests/{version}", accept=_ACCEPT) as response:
        body = response.read()
        header_digest = response.headers.get("Docker-Content-Digest")
        media = response.headers.get("Content-Type", "").split(";")[0].strip()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    expected = version if version.startswith("sha256:") else header_digest
    if expected and expected != digest:
        raise ImageError(f"manifest {repo}:{version} digest mismatch: expected {expected}, got {digest}")
    media = json.loads(body).get("mediaType") or media
    return body, media, digest


def pull(store: ImageStore, reference: str, *, insecure: bool = False,
         credentials: Credentials | None = None, platform: tuple[str, str] | None = None,
         ca_file: str | None = None) -> Image:
    """Pull `reference` into `store` and name it (`<registry>/<repo>:<tag>`); returns the image."""
    ref = parse_reference(reference)
    host, repo = ref.remote
    client = RegistryClient(host, insecure=insecure, credentials=credentials, ca_file=ca_file)
    body, media, digest = _fetch_manifest(client, repo, ref.version)
    if media in INDEX_TYPES:
        store.add_blob(body, expected=digest)
        chosen = choose_manifest(json.loads(body), f"{ref.name}", platform)
        body, media, digest = _fetch_manifest(client, repo, chosen["digest"])
    if media not in IMAGE_MANIFESTS:
        raise ImageError(f"{ref.name}: unsupported manifest type {media!r} (schema 1 is not supported)")
    manifest = json.loads(body)
    for blob in [manifest["config"], *manifest.get("layers", [])]:
        if store.has_blob(blob["digest"]):
            continue
        with client.get(f"/v2/{repo}/blobs/{blob['digest']}") as response:
            store.add_blob_stream(response, expected=blob["digest"])
    store.add_blob(body, expected=digest)
    return store.resolve(store.tag(ref.name, digest))
