"""Admission: the apply/diff/delete path and authorization, judged by rules/admission.lp and policies.

The API server authenticates the caller and passes a `Principal`; this package compiles what it
applies, decides RBAC/ABAC, quota and operator policy as logic (rules/README.md, "admission",
documents the vocabulary) and commits each request in one guarded transaction. Nothing is written
when anything is denied (`Denied.denials` says which policy, which code, which value).
"""

from ccattler.engine.admission.capabilities import BadCapability, UnknownKind, parse_capability
from ccattler.engine.admission.model import (
    ApplyResult,
    Change,
    Conflict,
    Decision,
    Denial,
    Denied,
    Diff,
    ObjectRef,
    PolicyError,
    PolicyWarning,
    Principal,
)
from ccattler.engine.admission.operations import (
    NotFound,
    apply_sources,
    authorize,
    delete_objects,
    delete_sources,
    diff_sources,
)
from ccattler.engine.admission.policies import (
    OperatorPolicy,
    apply_policy,
    delete_policy,
    list_policies,
    validate_policy,
)

__all__ = [
    "ApplyResult",
    "BadCapability",
    "Change",
    "Conflict",
    "Decision",
    "Denial",
    "Denied",
    "Diff",
    "NotFound",
    "ObjectRef",
    "OperatorPolicy",
    "PolicyError",
    "PolicyWarning",
    "Principal",
    "UnknownKind",
    "apply_policy",
    "apply_sources",
    "authorize",
    "delete_objects",
    "delete_policy",
    "delete_sources",
    "diff_sources",
    "list_policies",
    "parse_capability",
    "validate_policy",
]
