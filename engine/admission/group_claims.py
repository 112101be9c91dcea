"""Group-member claims and guards: the store-level half of "members of a `share network` group
never listen on one port".

admission.lp refuses a clash it can see (`group_port_clash`) — but an apply that writes a group and
one that writes a member of it, each having read the store before the other's commit, would both
pass. So the commit of an apply is also guarded (0: absent), in its own transaction:
- for each `share network` group whose ports it checks (it writes the group, or one of its
  members), on the group's key and every member's service key at the revisions it read — so a
  concurrent write of the group or of a member fails it;
- for each service it writes, on that service's member claim `claim/group-member/<tenant>/<name>`,
  which an apply that makes a `share network` group list a service it did not list before writes
  (naming the group) — so a group created, or made to share, or to list the service, concurrently
  fails the service's apply, which could not otherwise know the group's key.
A claim is deleted, guarded on its revision, when the last `share network` group listing the
service stops listing it. The loser's retry (operations.run_plan) re-reads the store and admission
refuses it naming the group, the port and both services. As port_claims.py, this holds across
several API servers on one store (etcd and SQLite evaluate the compares inside the transaction).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ccattler.engine.admission.port_claims import ClaimWrites
from ccattler.engine.admission.vocabulary import group_members, shared_groups, shares_network
from ccattler.engine.facts.keys import DESIRED_GROUPS, DESIRED_SERVICES, GROUP_MEMBER_CLAIMS
from ccattler.engine.store import Compare


def member_key(service: str) -> str:
    """The member claim of service `tenant/name`."""
    return f"{GROUP_MEMBER_CLAIMS}{service}"


def read_members(facts: Iterable[Any]) -> dict[str, int]:
    """`store.range(GROUP_MEMBER_CLAIMS)` facts as claim key → mod revision."""
    return {f.key: f.mod_revision for f in facts}


def _shared_members(docs: Mapping[str, Mapping[str, Any]], group: str) -> set[str]:
    return set(group_members(docs, group)) if shares_network(docs.get(f"{DESIRED_GROUPS}{group}")) else set()


def group_claim_writes(before: Mapping[str, Mapping[str, Any]], mod_revisions: Mapping[str, int],
                       members: Mapping[str, int], puts: Mapping[str, Any],
                       deletes: Iterable[str]) -> ClaimWrites:
    """The guards and member-claim changes of an apply that puts `puts` and deletes `deletes` over
    the documents `before` (with their `mod_revisions`, and the member claims `members` as read at
    the same revision)."""
    deletes = tuple(deletes)
    out = ClaimWrites()
    services = {k[len(DESIRED_SERVICES):] for k in puts if k.startswith(DESIRED_SERVICES)}
    groups = {k[len(DESIRED_GROUPS):] for k in (*puts, *deletes) if k.startswith(DESIRED_GROUPS)}
    if not (services or groups):
        return out
    after = {k: v for k, v in before.items() if k not in deletes} | dict(puts)
    guarded = {member_key(s): members.get(member_key(s), 0) for s in services}
    for group in shared_groups(after, groups, services):
        keys = [f"{DESIRED_GROUPS}{group}", *(f"{DESIRED_SERVICES}{m}" for m in group_members(after, group))]
        guarded |= {key: mod_revisions.get(key, 0) for key in keys}
    out.compares.extend(Compare(k, r) for k, r in sorted(guarded.items()))
    gained: dict[str, str] = {}
    dropped: set[str] = set()
    for group in sorted(groups):
        old, new = _shared_members(before, group), _shared_members(after, group)
        for service in sorted(new - old):
            gained.setdefault(service, group)
        dropped |= old - new
    for service, group in sorted(gained.items()):
        out.puts[member_key(service)] = {"service": service, "group": group}
    if dropped - set(gained):
        listed = {m for k in after if k.startswith(DESIRED_GROUPS)
                  for m in _shared_members(after, k[len(DESIRED_GROUPS):])}
        for service in sorted(dropped - set(gained) - listed):
            key = member_key(service)
            if key in members:  # never written for a group stored before these claims
                if key not in guarded:
                    out.compares.append(Compare(key, members[key]))
                out.deletes.append(key)
    return out
