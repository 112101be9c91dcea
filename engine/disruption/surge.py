"""How the instance controller applies a drain: `derived/disruption/<tenant>/<service>` asks for
`extra` surge instances of the current spec (started elsewhere before the old ones go) and names
the instances to `remove` (each within the service's budget, decided by the disruption controller).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def surge(
    counts: Mapping[str, int], spec: str, have: Sequence[T], names: Sequence[str],
    disruption: Mapping[str, Any] | None,
) -> tuple[dict[str, int], list[T], list[T]]:
    """(counts with the surge added to the current spec, the instances kept, the instances removed).

    `names[i]` is the name of `have[i]`. Without a document nothing changes."""
    counts = dict(counts)
    if not isinstance(disruption, Mapping):
        return counts, list(have), []
    extra = disruption.get("extra")
    if isinstance(extra, int) and not isinstance(extra, bool) and extra > 0:
        counts[spec] = counts.get(spec, 0) + extra
    remove = set(disruption.get("remove") or ())
    kept = [inst for inst, name in zip(have, names, strict=True) if name not in remove]
    gone = [inst for inst, name in zip(have, names, strict=True) if name in remove]
    return counts, kept, gone
