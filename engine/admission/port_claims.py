"""External-port claims: the store-level half of "one service per external port".

admission.lp refuses an apply whose service would share an external port with another service
it can see — but two applies that each read the store before the other's commit would both pass.
So each apply also writes, in its own transaction, the claim key of every external port its
services hold afterwards (`claim/external-port/<proto>/<port>` naming the service), deletes the
claims of ports they no longer hold, and guards each of those keys on the revision it read (0:
absent). Of two racing applies only one commit holds; the other's transaction fails, and its retry
(operations.run_plan) re-reads the store, sees the winner's service and is refused by admission
with the port and the holder's name. etcd and SQLite both evaluate the compares inside the
transaction, so this also holds across several API servers on one store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ccattler.engine.admission.vocabulary import external_ports
from ccattler.engine.facts.keys import DESIRED_SERVICES, EXTERNAL_PORT_CLAIMS
from ccattler.engine.store import Compare

Port = tuple[int, str]  # (port, l4 protocol)


def claim_key(port: int, protocol: str) -> str:
    return f"{EXTERNAL_PORT_CLAIMS}{protocol}/{port}"


@dataclass(frozen=True, slots=True)
class Claim:
    """A claim as read: the service holding it and the key's mod revision."""

    service: str
    mod_revision: int


@dataclass(slots=True)
class ClaimWrites:
    """What the apply's transaction must also put, delete and compare."""

    puts: dict[str, Any] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    compares: list[Compare] = field(default_factory=list)


def read_claims(facts: Any) -> dict[str, Claim]:
    """`store.range(EXTERNAL_PORT_CLAIMS)` facts as claim key → Claim."""
    return {f.key: Claim(str((f.value or {}).get("service")), f.mod_revision) for f in facts}


def claim_writes(before: Mapping[str, Mapping[str, Any]], claims: Mapping[str, Claim],
                 puts: Mapping[str, Any], deletes: tuple[str, ...] | list[str]) -> ClaimWrites:
    """The claim changes of an apply that puts `puts` and deletes `deletes` over the documents
    `before` (with `claims` as read at the same revision)."""
    touched = {k for k in (*puts, *deletes) if k.startswith(DESIRED_SERVICES)}
    out = ClaimWrites()
    if not touched:
        return out
    held: dict[Port, str] = {}  # what the touched services hold after the apply
    released: set[Port] = set()
    for key in sorted(touched):
        name = key[len(DESIRED_SERVICES):]
        after = external_ports(puts.get(key))
        for port in after:
            held.setdefault(port, name)  # two claimants in one apply: admission refuses it anyway
        released |= {p for p in external_ports(before.get(key)) - after}
    for (port, protocol), name in sorted(held.items()):
        key, claim = claim_key(port, protocol), claims.get(claim_key(port, protocol))
        out.compares.append(Compare(key, claim.mod_revision if claim else 0))
        if claim is None or claim.service != name:
            out.puts[key] = {"service": name, "port": port, "protocol": protocol}
    touched_names = {k[len(DESIRED_SERVICES):] for k in touched}
    for port, protocol in sorted(released - set(held)):
        key, claim = claim_key(port, protocol), claims.get(claim_key(port, protocol))
        if claim is not None and claim.service in touched_names:  # never another service's claim
            out.compares.append(Compare(key, claim.mod_revision))
            out.deletes.append(key)
    return out
