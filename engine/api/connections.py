"""`connection` blocks assembled into URLs for the instances that use them: `driver://user:password@
host:port/database?options`, each part percent-escaped, the password decrypted from the
connection's secret without a trailing newline (a service that uses a connection is granted that
secret by using it). The
host `t/svc` becomes `svc.t`, the stable name the cluster DNS serves for a service."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from ccattler.engine.api.errors import NotFound
from ccattler.engine.facts import service_doc
from ccattler.engine.facts.keys import DESIRED_CONNECTIONS
from ccattler.engine.secrets import KeyProvider, reveal_secret
from ccattler.engine.store import Store


def host_name(host: str) -> str:
    """`payments/db` → `db.payments`; anything without a tenant stays as written."""
    tenant, _, name = host.partition("/")
    return f"{name}.{tenant}" if name else host


def connection_url(doc: dict[str, Any], password: bytes | None) -> str:
    """The URL of one `desired/connection` document with the plaintext `password`."""
    url = f"{doc.get('driver') or 'tcp'}://"
    if doc.get("user") is not None:
        url += quote(str(doc["user"]), safe="")
        if password is not None:
            url += ":" + quote(password.decode("utf-8", "surrogateescape").rstrip("\n"), safe="")
        url += "@"
    url += host_name(str(doc.get("host") or "localhost"))
    if doc.get("port") is not None:
        url += f":{int(doc['port'])}"
    if doc.get("database") is not None:
        url += "/" + quote(str(doc["database"]), safe="")
    if doc.get("options"):
        url += "?" + urlencode(sorted((str(k), str(v)) for k, v in doc["options"].items()))
    return url


def connection_files(store: Store, keys: KeyProvider, service: dict[str, Any]
                     ) -> list[tuple[str, bytes, str]]:
    """(name, URL, mount) for every connection `service` uses, mounted at /run/connections/<name>."""
    files = []
    for ref in service_doc.connections(service):
        tenant, _, name = str(ref).partition("/")
        fact = store.get(f"{DESIRED_CONNECTIONS}{tenant}/{name}")
        if fact is None:
            raise NotFound(f"connection {ref} is not declared")
        secret = fact.value.get("secret")
        password = reveal_secret(store, keys, secret) if secret else None
        if secret and password is None:
            raise NotFound(f"secret {secret} of connection {ref} has no value yet (cca secret set {secret})")
        files.append((f"connection:{ref}", connection_url(fact.value, password).encode(),
                      f"/run/connections/{name}"))
    return files
