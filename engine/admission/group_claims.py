"""Guards of `share network` groups: the store-level half of "members of a `share network` group
never listen on one port".

admission.lp refuses a clash it can see (`group_port_clash`) — but an apply that writes a group and
one that writes a member of it, each having read the store before the other's commit, would both
pass. So the commit of an apply is also guarded (0: absent), in its own transaction:
- for each `share network` group whose ports it checks (it writes the group, or one of its
  members), on the group's key and every member's service key at the revisions it read — so a
  concurrent write of the group or of a member fails it;
- when it writes a service that listens on a port, on `claim/shared-network` (`SHARED_NETWORK`),
  which every apply that makes a `share network` group list a service it did not list before
  rewrites — so a group created, made to share, or made to list the service concurrently fails the
  service's apply, which could not otherwise know the group's key. One key, not one per service:
  one compare per apply whatever its size (a transaction holds at most `MAX_TXN_OPS` compares),
  at the price of a retry for an apply that races any group gaining members.
The loser's retry (operations.run_plan) re-reads the store and admission refuses it naming the
group, the port and both services. As port_claims.py, this holds across several API servers on
one store (etcd and SQLite evaluate the compares inside the transaction).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ccattler.engine.admission.port_claims import ClaimWrites
from ccattler.engine.admission.vocabulary import group_members, listened_ports, shared_groups, shares_network
from ccattler.engine.facts.keys import DESIRED_GROUPS, DESIRED_SERVICES, SHARED_NETWORK
from ccattler.engine.store import Compare


def _shared_members(docs: Mapping[str, Mapping[str, Any]], group: str) -> set[str]:
    return set(group_members(docs, group)) if shares_network(docs.get(f"{DESIRED_GROUPS}{group}")) else set()


def group_claim_writes(before: Mapping[str, Mapping[str, Any]], mod_revisions: Mapping[str, int],
                       shared_revision: int, puts: Mapping[str, Any], deletes: Iterable[str]) -> ClaimWrites:
    """The guards of an apply that puts `puts` and deletes `deletes` over the documents `before`
    (with their `mod_revisions`, and `SHARED_NETWORK`'s mod revision as read at the same revision),
    and its rewrite of `SHARED_NETWORK` when a `share network` group gains members."""
    gone = set(deletes)
    out = ClaimWrites()
    services = {k[len(DESIRED_SERVICES):] for k in puts if k.startswith(DESIRED_SERVICES)}
    groups = {k[len(DESIRED_GROUPS):] for k in (*puts, *gone) if k.startswith(DESIRED_GROUPS)}
    if not (services or groups):
        return out
    after = {k: v for k, v in before.items() if k not in gone} | dict(puts)
    guarded: dict[str, int] = {}
    if any(listened_ports(puts[f"{DESIRED_SERVICES}{s}"]) for s in services):
        guarded[SHARED_NETWORK] = shared_revision
    for group in shared_groups(after, groups, services):
        keys = [f"{DESIRED_GROUPS}{group}", *(f"{DESIRED_SERVICES}{m}" for m in group_members(after, group))]
        guarded |= {key: mod_revisions.get(key, 0) for key in keys}
    out.compares.extend(Compare(k, r) for k, r in sorted(guarded.items()))
    gained = {}
    for group in sorted(groups):
        new = _shared_members(after, group) - _shared_members(before, group)
        if new:
            gained[group] = sorted(new)
    if gained:
        out.puts[SHARED_NETWORK] = {"gained": gained}
    return out
