"""Client configuration, like a kubeconfig: named contexts (server address, CA, credentials) in
`$CCA_HOME/config.yaml` (CCA_HOME defaults to `~/.ccattler`), so clusters and tests live side by side.

A context authenticates with a client certificate (`cert`/`key`, mutual TLS on `server`) or a bearer
token (`token`, server-verified TLS on `token_server`). `CCA_CONTEXT`, `CCA_SERVER` and `CCA_TOKEN`
override the file, as do the CLI's `--context`/`--server`/`--token`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from ccattler.engine.facts import CcaError

CONFIG_NAME = "config.yaml"
DEFAULT_SERVER = "127.0.0.1:7443"


class ConfigError(CcaError):
    """The client configuration is missing, malformed or names an unknown context."""


def cca_home() -> Path:
    return Path(os.environ.get("CCA_HOME") or Path.home() / ".ccattler").expanduser()


def token_address(server: str) -> str:
    """The bearer-token listener beside a mutual-TLS address: the next port (of each, for a list)."""
    if "," in server:
        return ",".join(token_address(one) for one in server_list(server))
    host, _, port = server.rpartition(":")
    return f"{host}:{int(port) + 1}" if port.isdigit() else server


def server_list(servers: str) -> list[str]:
    """`a:1,b:2` → ["a:1", "b:2"]: the API servers of one cluster, tried in this order."""
    return [one.strip() for one in servers.split(",") if one.strip()]


def free_port_pair(host: str = "127.0.0.1") -> int:
    """A port P with P and P+1 free on `host` (a server's mutual-TLS and bearer-token listeners);
    for tests and benchmarks that start servers side by side."""
    import socket

    for _ in range(50):
        with socket.socket() as a, socket.socket() as b:
            a.bind((host, 0))
            port = a.getsockname()[1]
            try:
                b.bind((host, port + 1))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port pair")


@dataclass(frozen=True, slots=True)
class Context:
    """How to reach and authenticate to one cluster."""

    name: str
    server: str
    ca: str
    token_server: str | None = None
    cert: str | None = None
    key: str | None = None
    token: str | None = None
    #: The cluster's own PKI directory, on the machine that ran `cca init` (used by `cca server`).
    cluster: str | None = None
    #: The control plane's store URL (`cca init --etcd`), the default of `cca server`/`cca runner`.
    store: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        del doc["name"]
        return {k: v for k, v in doc.items() if v is not None}


@dataclass(frozen=True, slots=True)
class ClientConfig:
    current: str | None
    contexts: dict[str, Context]

    def context(self, name: str | None = None) -> Context:
        chosen = name or os.environ.get("CCA_CONTEXT") or self.current
        if not chosen:
            raise ConfigError(f"no context configured in {cca_home() / CONFIG_NAME} (run `cca init`)")
        if chosen not in self.contexts:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise ConfigError(f"unknown context {chosen!r} (known: {known})")
        return self.contexts[chosen]


def load_config(home: Path | None = None) -> ClientConfig:
    path = (home or cca_home()) / CONFIG_NAME
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        return ClientConfig(None, {})
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("contexts", {}), dict):
        raise ConfigError(f"{path}: expected a mapping with `contexts`")
    contexts = {}
    for name, body in doc.get("contexts", {}).items():
        try:
            contexts[name] = Context(name=name, **body)
        except TypeError as exc:
            raise ConfigError(f"{path}: context {name!r}: {exc}") from None
    return ClientConfig(doc.get("current-context"), contexts)


def save_context(context: Context, *, make_current: bool = True, home: Path | None = None) -> Path:
    """Add or replace one context in the config file (written 0600: it may hold a token)."""
    home = home or cca_home()
    config = load_config(home)
    contexts = dict(config.contexts) | {context.name: context}
    current = context.name if make_current or not config.current else config.current
    doc = {"current-context": current, "contexts": {n: c.to_json() for n, c in sorted(contexts.items())}}
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home / CONFIG_NAME
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    tmp.replace(path)
    return path


def resolve_context(name: str | None = None, server: str | None = None, token: str | None = None) -> Context:
    """The context to use, with command-line and environment overrides applied."""
    context = load_config().context(name)
    server = server or os.environ.get("CCA_SERVER")
    token = token or os.environ.get("CCA_TOKEN")
    if server:
        context = replace(context, server=server, token_server=token_address(server))
    if token:
        context = replace(context, token=token, cert=None, key=None)
    return context
