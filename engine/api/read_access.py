"""What one caller may read, key by key: each key's guard (`engine.facts.keys.read_guard`: the
capability kind and tenant its prefix says) decided by admission once per (capability, tenant)
and remembered for the call, so a watch or a list judges thousands of keys with a few decisions.

A long watch forgets its decisions after `TTL` seconds, and at once when it streams a change to
roles, grants, policies or users: a revoked reader stops seeing keys without reconnecting.
"""

from __future__ import annotations

import time

from ccattler.engine import admission
from ccattler.engine.admission.model import Denied, Principal
from ccattler.engine.facts.keys import (
    AUTH,
    DESIRED_GRANTS,
    DESIRED_GROUPS,
    DESIRED_LP,
    DESIRED_POLICIES,
    DESIRED_ROLES,
)
from ccattler.engine.facts.read_guards import ReadGuard, read_guard
from ccattler.engine.store import Store

TTL = 10.0
#: Keys whose change may change what a caller may read.
_AUTH_KEYS = (DESIRED_ROLES, DESIRED_GRANTS, DESIRED_POLICIES, DESIRED_LP, DESIRED_GROUPS, AUTH)


def capability_of(guard: ReadGuard) -> tuple[str, str | None]:
    """The capability and resource admission is asked about for `guard`."""
    if guard.capability == "cluster":
        return "cluster.admin", None
    return f"{guard.capability}.read", f"{guard.tenant}/*" if guard.tenant else None


class ReadAccess:
    """Read decisions for one principal over one store (not thread-safe: one per call)."""

    def __init__(self, store: Store, principal: Principal, ttl: float | None = None) -> None:
        self.store, self.principal, self.ttl = store, principal, TTL if ttl is None else ttl
        self._decided: dict[ReadGuard, admission.Decision] = {}
        self._since = time.monotonic()

    def decide(self, guard: ReadGuard) -> admission.Decision:
        if time.monotonic() - self._since > self.ttl:
            self.forget()
        decision = self._decided.get(guard)
        if decision is None:
            capability, resource = capability_of(guard)
            decision = admission.authorize(self.store, self.principal, capability, resource)
            self._decided[guard] = decision
        return decision

    def allows(self, guard: ReadGuard) -> bool:
        return bool(self.decide(guard))

    def require(self, guard: ReadGuard) -> None:
        """Raise `Denied` (PERMISSION_DENIED, with admission's reasons) unless `guard` is met."""
        decision = self.decide(guard)
        if not decision:
            raise Denied(decision.denials)

    def may_read(self, key: str) -> bool:
        return self.allows(read_guard(key))

    def noticed(self, key: str) -> None:
        """A streamed change: one to authorization state drops every remembered decision."""
        if key.startswith(_AUTH_KEYS):
            self.forget()

    def forget(self) -> None:
        self._decided.clear()
        self._since = time.monotonic()
