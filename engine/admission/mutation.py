"""Operator-derived changes: `set_default(Service, Field, Value)` fills a field the user left unset.

Fields: `owner`, `tags.KEY`, `env.KEY` (values are strings). A default never overwrites a declared
value; two policies giving one field different values is a denial, as is an unknown field.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from ccattler.engine.admission.evaluate import Mutation
from ccattler.engine.admission.model import Denial
from ccattler.engine.admission.reasons import render_value
from ccattler.engine.facts.keys import DESIRED_SERVICES

_MAP_FIELDS = ("tags", "env")


def _target(field: str) -> tuple[str, str | None] | None:
    if field == "owner":
        return "owner", None
    top, dot, key = field.partition(".")
    if top in _MAP_FIELDS and dot and key:
        return top, key
    return None


def apply_mutations(
    docs: Mapping[str, dict[str, Any] | None], mutations: Iterable[Mutation], summary: str
) -> tuple[dict[str, dict[str, Any] | None], list[Denial]]:
    """`docs` (key → document written, None for deletions) with defaults filled in, and denials."""
    chosen: dict[tuple[str, str], Mutation] = {}
    denials: list[Denial] = []
    for mutation in sorted(mutations, key=lambda m: (m.service, m.field, m.policy, render_value(m.value))):
        if _target(mutation.field) is None:
            denials.append(Denial(
                mutation.policy, "bad_mutation", summary, mutation.field,
                f"set_default of unknown field {mutation.field!r} (owner, tags.KEY or env.KEY)",
            ))
            continue
        earlier = chosen.setdefault((mutation.service, mutation.field), mutation)
        if render_value(earlier.value) != render_value(mutation.value):
            denials.append(Denial(
                mutation.policy, "mutation_conflict", summary, render_value(mutation.value),
                f"{mutation.field} of {mutation.service}: {earlier.policy} sets "
                f"{render_value(earlier.value)!r}, {mutation.policy} sets {render_value(mutation.value)!r}",
            ))
    result = dict(docs)
    for (service, field), mutation in sorted(chosen.items()):
        tenant, _, name = service.partition("/")
        key = f"{DESIRED_SERVICES}{tenant}/{name}"
        if result.get(key) is None:
            continue  # only objects this request writes are mutated
        doc = result[key] = copy.deepcopy(result[key])
        top, sub = _target(field) or ("", None)
        value = render_value(mutation.value)
        if sub is None:
            if not doc.get(top):
                doc[top] = value
        else:
            doc[top] = dict(doc.get(top) or {})
            doc[top].setdefault(sub, value)
    return result, denials
