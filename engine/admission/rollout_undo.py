"""`cca rollout undo SERVICE`: re-apply the service's previous spec, admitted like any change.

The previous spec's fields come from its rollout document (`derived/rollout/<t>/<s>`: `previous`
and `fields`, engine/rollout); the stored `desired/service` document gets them back, with an
`undone` note (`{"spec", "by"}`). The rollout controller then rolls out that spec like any new one
(after an automatic rollback the instances already run it, so nothing moves). Like `cca scale`,
the next apply of the service's file writes the file's document again.
"""

from __future__ import annotations

from collections.abc import Mapping

from ccattler.engine.admission.capabilities import ref_for
from ccattler.engine.admission.model import ApplyResult, Principal
from ccattler.engine.admission.operations import NotFound, run_plan
from ccattler.engine.admission.plan import Plan, State, plan_changes
from ccattler.engine.facts import DEFAULT_TENANT, CcaError
from ccattler.engine.facts.keys import DESIRED_SERVICES, ROLLOUTS
from ccattler.engine.store import Store


class UndoRefused(CcaError):
    """There is no previous spec to go back to (the message says why)."""


def undo_rollout(store: Store, principal: Principal, name: str, *, tenant: str = DEFAULT_TENANT,
                 dry_run: bool = False) -> ApplyResult:
    ref = ref_for("service", name, tenant)
    summary = f"rollout undo {ref}"
    fact = store.get(ROLLOUTS + ref.key.removeprefix(DESIRED_SERVICES))
    rollout = fact.value if fact is not None and isinstance(fact.value, Mapping) else None
    previous = rollout.get("previous") if rollout else None
    fields = ((rollout or {}).get("fields") or {}).get(previous) if previous else None
    if not isinstance(fields, Mapping):
        raise UndoRefused(f"{ref} has no previous spec to go back to (cca rollout history {ref})")

    def make_plan(state: State) -> Plan:
        doc = state.docs.get(ref.key)
        if not isinstance(doc, dict):
            raise NotFound(f"{ref} not found")
        new = {**doc, **fields, "undone": {"spec": previous, "by": principal.name}}
        return plan_changes(state, principal, {ref.key: new}, summary)

    return run_plan(store, dry_run, make_plan, summary)
