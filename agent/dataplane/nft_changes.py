"""What one `apply` must change in the service table: the frontends whose backends differ from the
last applied input, validated and in kernel form, before anything is sent (agent/dataplane/nftables.py
turns them into one transaction)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ccattler.agent.dataplane.base import PROTOCOLS, Backend, DataPlaneState, Frontend
from ccattler.agent.dataplane.nft_service_table import WIDE, Addr
from ccattler.engine.facts import CcaError

_DOTTED = re.compile(r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}")

_MISSING = object()


class ServiceTableError(CcaError):
    """nft refused a change (the message carries its own words), or the state is invalid."""


class InvalidServiceState(ServiceTableError, ValueError):
    """A frontend or backend nft cannot express (bad address, port or protocol): nothing was sent."""


def _normal(backends: Iterable[Backend]) -> tuple[Addr, ...]:
    return tuple(sorted({(b.ip, b.port) for b in backends}))


def check_ip(ip: str, what: str) -> None:
    if not isinstance(ip, str) or not _DOTTED.fullmatch(ip):  # as strict as ipaddress, 5x faster
        raise InvalidServiceState(f"{what} {ip!r} is not an IPv4 address")


def changed_frontends(state: DataPlaneState, last: tuple[Mapping, Mapping], full: bool) -> tuple[dict, dict]:
    """The frontends whose backends differ from the last applied input, validated and in kernel
    form (None: removed), or a clear error naming the bad one before anything is sent."""
    out: tuple[dict, dict] = ({}, {})
    for kind, raw, before, changed in (("service", state.services, last[0], out[0]),
                                       ("external port", state.external, last[1], out[1])):
        if raw is before and not full:
            continue
        same_order = None if full else _in_step(raw, before)
        if same_order is not None:  # the usual case: the same frontends in the same order
            for front, backends in same_order:
                key, addrs = _validated(kind, front, backends)
                changed[key] = addrs
            continue
        kept = 0
        for front, backends in raw.items():
            if not full:
                had = before.get(front, _MISSING)
                if had is not _MISSING:
                    kept += 1
                    if had == backends:
                        continue
            key, addrs = _validated(kind, front, backends)
            changed[key] = addrs
        if not full and kept < len(before):  # some frontends are gone
            for front in before.keys() - raw.keys():
                changed[_key(kind, front)] = None
    return out


def service_changes(raw: Mapping, before: Mapping) -> tuple[list, list]:
    """(frontend, backends) of `raw` that are new or differ from `before`, and the frontends of
    `before` that `raw` lacks. Rows kept by the agent's StateBuilder (the same objects, in the same
    order) are passed over by identity; otherwise every frontend is looked up in `before`."""
    if raw is before:
        return [], []
    same_order = _in_step(raw, before)
    if same_order is not None:
        return same_order, []
    changed, kept = [], 0
    for front, backends in raw.items():
        had = before.get(front, _MISSING)
        if had is not _MISSING:
            kept += 1
            if had is backends or had == backends:
                continue
        changed.append((front, backends))
    removed = list(before.keys() - raw.keys()) if kept < len(before) else []
    return changed, removed


def _in_step(raw: Mapping, before: Mapping) -> list | None:
    """The changed (frontend, backends) when `raw` has the same frontends as `before` in the same
    order (walked side by side: no hashing of 30,000 dataclass keys), else None."""
    if len(raw) != len(before):
        return None
    out = []
    for (front, backends), (had, was) in zip(raw.items(), before.items(), strict=True):
        if front is not had and front != had:
            return None
        if backends is not was and backends != was:
            out.append((front, backends))
    return out


def _key(kind: str, front: Frontend) -> tuple:
    return (front.ip, front.protocol, front.port) if kind == "service" else (front.protocol, front.port)


def _validated(kind: str, front: Frontend, backends: Iterable[Backend]) -> tuple[tuple, tuple[Addr, ...]]:
    """One frontend's key and sorted distinct backends (at most WIDE), or InvalidServiceState."""
    key, addrs = validated(kind, front, backends)
    return key, addrs[:WIDE]


def validated(kind: str, front: Frontend, backends: Iterable[Backend]) -> tuple[tuple, tuple[Addr, ...]]:
    """One frontend (`kind`: "service" or "external port") checked as every kernel plane needs it:
    its key and sorted distinct backends (all of them), or InvalidServiceState naming the bad one."""
    where = f"{kind} {front.ip or '*'}:{front.port}/{front.protocol}"
    if front.protocol not in PROTOCOLS:
        raise InvalidServiceState(f"{where}: protocol must be one of {', '.join(PROTOCOLS)}")
    if not isinstance(front.port, int) or not 0 < front.port < 65536:
        raise InvalidServiceState(f"{where}: port out of range")
    if kind == "service":
        check_ip(front.ip, f"{where}: VIP")
    elif front.ip:
        raise InvalidServiceState(f"{where}: an external port is on every node address (ip must be '')")
    addrs = _normal(backends)
    for ip, port in addrs:
        check_ip(ip, f"{where}: backend")
        if not isinstance(port, int) or not 0 < port < 65536:
            raise InvalidServiceState(f"{where}: backend {ip}:{port} port out of range")
    return _key(kind, front), addrs
