"""The policy effect of a change: which connections it opens or closes (`cca diff`), and a summary
of who may reach whom (`cca plan`). Both compare rules/netpolicy.lp's answers, never addresses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccattler.engine.facts.keys import DESIRED_SERVICES
from ccattler.engine.netpolicy.evaluate import Policy, evaluate

EVERYONE = "*"


Reach = dict[str, frozenset[tuple[str, int, str]]]


def reach(values: Mapping[str, Any], policy: Policy | None = None) -> Reach:
    """Destination identity → the (source, port, protocol) it accepts; an open one accepts ("*", 0, any)."""
    policy = policy or evaluate(values)
    out = {}
    for key in values:
        if key.startswith(DESIRED_SERVICES):
            identity = key[len(DESIRED_SERVICES):]
            if identity in policy.guarded:
                tuples = policy.allowed.get(identity, ())
                out[identity] = frozenset((t.source, t.port, t.protocol) for t in tuples)
            else:
                out[identity] = frozenset({(EVERYONE, 0, "any")})
    return out


def _entry(destination: str, source: str, port: int, protocol: str) -> dict[str, Any]:
    return {"from": source, "to": destination, "port": port, "protocol": protocol}


def connection_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """`{"opened": [...], "closed": [...]}` between two snapshots' values (services that appear or
    disappear with the change are not listed: their connections come and go with them). A
    destination that becomes default-deny closes `*` (everyone) except what is then listed as allowed."""
    old, new = reach(before), reach(after)
    opened, closed = [], []
    for destination in sorted(old.keys() & new.keys()):
        was, now = old[destination], new[destination]
        was_open, now_open = (EVERYONE, 0, "any") in was, (EVERYONE, 0, "any") in now
        if was_open and not now_open:
            entry = _entry(destination, EVERYONE, 0, "any")
            entry["except"] = [_entry(destination, *t) for t in sorted(now)]
            closed.append(entry)
            continue
        if now_open and not was_open:
            opened.append(_entry(destination, EVERYONE, 0, "any"))
            continue
        opened += [_entry(destination, *t) for t in sorted(now - was)]
        closed += [_entry(destination, *t) for t in sorted(was - now)]
    return {"opened": opened, "closed": closed}


def describe(entry: Mapping[str, Any]) -> str:
    """`frontend/web -> payments/database:5432/tcp` (`*` = every identity, `any` port/protocol)."""
    port = entry["port"] or "any"
    source = "every identity" if entry["from"] == EVERYONE else entry["from"]
    text = f"{source} -> {entry['to']}:{port}/{entry['protocol']}"
    if entry.get("except"):
        kept = (f"{e['from']}:{e['port'] or 'any'}/{e['protocol']}" for e in entry["except"])
        text += " except " + ", ".join(kept)
    return text


def summary_lines(values: Mapping[str, Any]) -> list[str]:
    """One line per default-deny destination: who may reach it (open destinations are not listed)."""
    policy = evaluate(values)
    lines = []
    for destination in sorted(policy.guarded):
        allowed = policy.allowed.get(destination, ())
        who = ", ".join(f"{t.source}:{t.port or 'any'}/{t.protocol}" for t in allowed) or "nothing"
        lines.append(f"{destination}: default deny; allows {who}")
    for rule, code, args in policy.lints:
        lines.append(f"lint: rule {rule} {code.replace('_', ' ')} {' '.join(args)}".rstrip())
    return lines
