"""`cca scale SERVICE N`: an override of a service's `instances`, admitted like any change.

The stored `desired/service` document gets `instances: N` and a `scaled` note (`{"instances",
"declared", "by"}`); the next apply of the service's file writes the file's document again, which
replaces the override (the file is the source of truth, as with `kubectl scale`). Refused for a
service whose count the autoscaler owns (`scale { horizontal … }`: change min/max in the file) and
for a member of a service group (its members must keep the same count: change them in the file).
"""

from __future__ import annotations

from ccattler.engine.admission.capabilities import ref_for
from ccattler.engine.admission.model import ApplyResult, Principal
from ccattler.engine.admission.operations import NotFound, run_plan
from ccattler.engine.admission.plan import Plan, State, plan_changes
from ccattler.engine.facts import DEFAULT_TENANT, CcaError, service_doc
from ccattler.engine.store import Store

#: The most instances one `cca scale` asks for (a typo guard; files may declare more).
MAX_INSTANCES = 10_000


class ScaleRefused(CcaError):
    """This service's count is not `cca scale`'s to set (the message says whose it is)."""


def scale_service(store: Store, principal: Principal, name: str, instances: int, *,
                  tenant: str = DEFAULT_TENANT, dry_run: bool = False) -> ApplyResult:
    if not 0 <= instances <= MAX_INSTANCES:
        raise ScaleRefused(f"scale {name}: instances must be between 0 and {MAX_INSTANCES}, got {instances}")
    ref = ref_for("service", name, tenant)
    summary = f"scale {ref} to {instances}"

    def make_plan(state: State) -> Plan:
        doc = state.docs.get(ref.key)
        if not isinstance(doc, dict):
            raise NotFound(f"{ref} not found")
        if service_doc.horizontal(doc):
            h = doc["scale"]["horizontal"]
            raise ScaleRefused(
                f"{ref} has a scale {{ horizontal … }} block: the autoscaler sets its count "
                f"within min {h.get('min')} / max {h.get('max')}; change those in "
                f"{doc.get('source') or 'its file'}")
        if doc.get("group"):
            raise ScaleRefused(f"{ref} is in group {doc['group']}, whose services keep the same "
                               f"instances: change them together in {doc.get('source') or 'its file'}")
        declared = (doc.get("scaled") or {}).get("declared", doc.get("instances"))
        new = dict(doc, instances=instances)
        if instances == declared:
            new.pop("scaled", None)  # back at the file's count: no override left
        else:
            new["scaled"] = {"instances": instances, "declared": declared, "by": principal.name}
        return plan_changes(state, principal, {ref.key: new}, summary)

    return run_plan(store, dry_run, make_plan, summary)
