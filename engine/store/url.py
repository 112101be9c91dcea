"""`open_store(url)`: the one way to open a store; the URL scheme picks the backend.

`sqlite:///abs/path.db[?history=N&max_txn_ops=N&max_txn_bytes=N]`, `sqlite://:memory:`, and
`etcd://host:port[,host:port…][?prefix=/ccattler/&timeout=SECONDS&ca=PEM&cert=PEM&key=PEM]`
(`ca` alone: TLS that verifies the server; with `cert` and `key`: mutual TLS).
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs

from ccattler.engine.store.base import Store, StoreError

_SQLITE_OPTIONS = {"history", "max_txn_ops", "max_txn_bytes"}
_ETCD_OPTIONS = {"prefix", "timeout", "ca", "cert", "key"}
_EXPECTED = "expected sqlite:///absolute/path.db, sqlite://:memory: or etcd://host:port[,host:port…]"


def open_store(url: str) -> Store:
    """Open the store named by `url`; a malformed URL or an unreachable store is a `StoreError`."""
    if not isinstance(url, str):
        raise StoreError(f"store URL must be a string, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise StoreError(f"store URL {url!r} has no scheme; {_EXPECTED}")
    location, _, query = rest.partition("?")
    options = _options(url, query)
    if scheme == "sqlite":
        return _open_sqlite(url, location, options)
    if scheme == "etcd":
        return _open_etcd(url, location, options)
    raise StoreError(f"unknown store URL scheme {scheme + '://'!r} in {url!r}; {_EXPECTED}")


def _options(url: str, query: str) -> dict[str, str]:
    try:
        parsed = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise StoreError(f"store URL {url!r} has a malformed query {query!r}") from None
    for name, values in parsed.items():
        if len(values) > 1:
            raise StoreError(f"store URL {url!r} gives option {name!r} more than once")
    return {name: values[0] for name, values in parsed.items()}


def _int_option(url: str, options: dict[str, str], name: str) -> dict[str, int]:
    if name not in options:
        return {}
    try:
        value = int(options[name])
    except ValueError:
        value = 0
    if value <= 0:
        raise StoreError(f"store URL {url!r}: {name} must be a positive integer, got {options[name]!r}")
    return {name: value}


def _open_sqlite(url: str, location: str, options: dict[str, str]) -> Store:
    from ccattler.engine.store.sqlite import SqliteStore

    unknown = set(options) - _SQLITE_OPTIONS
    if unknown:
        raise StoreError(f"store URL {url!r}: unknown option(s) {', '.join(sorted(unknown))} "
                         f"(sqlite accepts {', '.join(sorted(_SQLITE_OPTIONS))})")
    kwargs: dict[str, int] = {}
    for name in sorted(_SQLITE_OPTIONS):
        kwargs.update(_int_option(url, options, name))
    if location == ":memory:":
        return SqliteStore(None, url=url, **kwargs)
    if not location.startswith("/"):
        raise StoreError(f"store URL {url!r} needs an absolute path (sqlite:///var/lib/ccattler/state.db)")
    directory = os.path.dirname(location)
    if not os.path.isdir(directory):
        raise StoreError(f"store URL {url!r}: directory {directory} does not exist")
    return SqliteStore(location, url=url, **kwargs)


def _open_etcd(url: str, location: str, options: dict[str, str]) -> Store:
    from ccattler.engine.store.etcd import EtcdStore, parse_endpoints

    unknown = set(options) - _ETCD_OPTIONS
    if unknown:
        raise StoreError(f"store URL {url!r}: unknown option(s) {', '.join(sorted(unknown))} "
                         f"(etcd accepts {', '.join(sorted(_ETCD_OPTIONS))})")
    endpoints = parse_endpoints(url, location)
    try:
        timeout = float(options.get("timeout", "5"))
    except ValueError:
        timeout = -1.0
    if timeout <= 0:
        raise StoreError(f"store URL {url!r}: timeout must be a positive number of seconds")
    credentials = _etcd_credentials(url, options)
    return EtcdStore(
        endpoints, prefix=options.get("prefix", ""), timeout=timeout, credentials=credentials, url=url
    )


def _etcd_credentials(url: str, options: dict[str, str]):
    """gRPC TLS credentials from the `ca`, `cert` and `key` files, or None for plaintext."""
    if not {"ca", "cert", "key"} & set(options):
        return None
    if ("cert" in options) != ("key" in options):
        raise StoreError(f"store URL {url!r}: give cert and key together (mutual TLS) or neither")
    pem: dict[str, bytes | None] = {}
    for name in ("ca", "cert", "key"):
        if name not in options:
            pem[name] = None
            continue
        try:
            with open(options[name], "rb") as file:
                pem[name] = file.read()
        except OSError as exc:
            raise StoreError(
                f"store URL {url!r}: cannot read {name} file {options[name]}: {exc.strerror}"
            ) from None
    import grpc  # here, not at the top: `cca --help` should not load gRPC

    return grpc.ssl_channel_credentials(pem["ca"], pem["key"], pem["cert"])
