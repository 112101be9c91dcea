"""The break-glass rule: operator policies can never lock the cluster administrator out.

The admin principal (`subject_kind(admin)`, which holds cluster.admin) removing, replacing or
reading operator policies, and reading cluster or node status, is judged by rules/admission.lp
only: operator `.lp` policies are not consulted. So `deny(all_denied, ()).` cannot stop its own
deletion, nor `cca up`'s readiness check after a restart.
"""

from __future__ import annotations

from collections.abc import Iterable

from ccattler.engine.admission.model import Principal
from ccattler.engine.admission.vocabulary import Request

#: Capability kinds the admin may always act on (any verb), and those it may always read.
ALWAYS_KINDS = frozenset({"policy"})
ALWAYS_READ_KINDS = frozenset({"cluster", "node", "audit"})


def break_glass(principal: Principal, requests: Iterable[Request]) -> bool:
    """True when operator policies must not judge these requests (see the module's doc)."""
    if principal.kind != "admin":
        return False
    requests = list(requests)
    return bool(requests) and all(
        r.kind in ALWAYS_KINDS or (r.verb == "read" and r.kind in ALWAYS_READ_KINDS) for r in requests
    )
